"""A model checkpoint as input (`mtp-audit layers --model DIR`): which MTP layers it physically
carries and how many bytes each holds. services/checkpoint.py joins them with a plan (built,
runs, dead weight); output/checkpoint.py renders the text.

Reads only `config.json` and the safetensors headers (an 8-byte little-endian header length,
then a JSON header naming every tensor's dtype, shape and byte range), of `model.safetensors`
or of the shards `model.safetensors.index.json` names: no tensor is loaded, nothing is
imported or executed. (The `safetensors` library would need numpy or torch to open a file;
the header is the documented, stable part of the format.)

Which tensors belong to MTP layer i follows the two weight-name conventions vLLM's MTP
loaders document, applied to any model (a configuration default, not a model list):

- a separate MTP module: a name whose path before its first `layers.<i>.` has a segment
  containing `mtp` (`mtp.layers.0.*`, Qwen3-Next / Qwen3.5 style) is MTP layer i; names under
  such a segment with no layer index (`mtp.fc.weight`, `mtp.norm.weight`) are MTP weights
  shared by all layers;
- MTP layers appended to the decoder: in the decoder's layer container (the prefix whose
  indices include 0 .. num_hidden_layers-1), index j >= num_hidden_layers is MTP layer
  j - num_hidden_layers (`model.layers.61.*` with 61 decoder layers, DeepSeek-V3 style).

num_hidden_layers is read from the text configuration (`text_config` where there is one).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from ..common.errors import UsageError
from ..model.checkpoint import Checkpoint, MtpLayer

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
MTP_SEGMENT_MARKER = "mtp"  # a path segment containing this names a separate MTP module
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the format's own limit on the JSON header

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


class CheckpointError(UsageError):
    """A model directory that cannot be read as a checkpoint: one line, exit 2."""


def read_header(path: Path) -> dict[str, int]:
    """Tensor name -> bytes, from one safetensors file's header."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path} is not a safetensors file (shorter than its 8-byte header length)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or n > size - 8:
                raise CheckpointError(f"{path} is not a safetensors file (header length {n} does not fit the file)")
            raw = f.read(n)
    except OSError as e:
        raise CheckpointError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise CheckpointError(f"{path} is not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path} is not a safetensors file (its header is not a JSON object)")
    data = size - 8 - n
    out: dict[str, int] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            raise CheckpointError(f"{path}: tensor {name!r} has no valid data_offsets")
        if offsets[1] > data:
            raise CheckpointError(f"{path} is truncated (tensor {name!r} ends at byte {offsets[1]} of {data})")
        out[name] = offsets[1] - offsets[0]
    return out


def read_tensors(model_dir: Path) -> tuple[dict[str, int], list[str]]:
    """Tensor name -> bytes over the whole checkpoint, and the files read."""
    index = model_dir / INDEX_FILE
    single = model_dir / SINGLE_FILE
    if index.is_file():
        try:
            doc = json.loads(index.read_text(encoding="utf-8"))
        except OSError as e:
            raise CheckpointError(f"cannot read {index}: {e.strerror or e}") from None
        except (UnicodeDecodeError, ValueError):
            raise CheckpointError(f"{index} is not JSON") from None
        wmap = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
            raise CheckpointError(f"{index} has no `weight_map` of tensor name -> shard file")
        shards: dict[str, dict[str, int]] = {}
        for shard in sorted(set(wmap.values())):
            if Path(shard).name != shard:
                raise CheckpointError(f"{index} names a shard outside the model directory: {shard!r}")
            p = model_dir / shard
            if not p.is_file():
                raise CheckpointError(f"{index} names {shard}, which is not in {model_dir}")
            shards[shard] = read_header(p)
        out = {}
        for name, shard in wmap.items():
            if name not in shards[shard]:
                raise CheckpointError(f"{index} puts {name!r} in {shard}, whose header does not have it")
            out[name] = shards[shard][name]
        return out, sorted(shards)
    if single.is_file():
        return read_header(single), [SINGLE_FILE]
    raise CheckpointError(f"{model_dir}: no {SINGLE_FILE} or {INDEX_FILE} (not a safetensors checkpoint)")


def read_config(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "config.json"
    if not model_dir.is_dir():
        raise CheckpointError(f"--model {model_dir}: no such directory")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"--model {model_dir}: no config.json (not a model directory)") from None
    except OSError as e:
        raise CheckpointError(f"cannot read {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, ValueError):
        raise CheckpointError(f"{path} is not JSON") from None
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path} must hold a JSON object (a model's config.json)")
    return cfg


def _num_hidden_layers(cfg: dict[str, Any]) -> int | None:
    text = cfg.get("text_config")
    for c in ((text if isinstance(text, dict) else {}), cfg):
        n = c.get("num_hidden_layers")
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            return n
    return None


def mtp_layers(tensors: dict[str, int], num_hidden_layers: int | None) -> tuple[list[MtpLayer], int]:
    """The MTP layers in a checkpoint's tensors (the conventions in the module docstring), and
    the bytes of MTP-module tensors outside any one layer."""
    per: dict[int, list[tuple[str, int]]] = {}
    prefixes: dict[int, str] = {}
    containers: dict[str, dict[int, list[int]]] = {}  # decoder candidates: prefix -> index -> bytes
    shared = 0
    for name, size in tensors.items():
        m = _LAYER.search(name)
        before = name[: m.start()] if m else name.rsplit(".", 1)[0]
        in_mtp = any(MTP_SEGMENT_MARKER in seg for seg in before.split(".") if seg)
        if m is None:
            if in_mtp:
                shared += size
            continue
        i = int(m.group(1))
        container = name[: m.start(1)].rstrip(".")  # e.g. "model.layers"
        if in_mtp:
            per.setdefault(i, []).append((name, size))
            prefixes[i] = f"{container}.{i}"
        else:
            containers.setdefault(container, {}).setdefault(i, []).append(size)
    if num_hidden_layers is not None:
        decoder = [c for c, idx in containers.items() if all(j in idx for j in range(num_hidden_layers))
                   and any(j >= num_hidden_layers for j in idx)]
        for c in decoder:
            for j, sizes in containers[c].items():
                if j >= num_hidden_layers:
                    i = j - num_hidden_layers
                    per.setdefault(i, []).extend((f"{c}.{j}", s) for s in sizes)
                    prefixes[i] = f"{c}.{j}"
    layers = [MtpLayer(i, prefixes[i], sum(s for _, s in per[i]), len(per[i])) for i in sorted(per)]
    return layers, shared


def read_checkpoint(model_dir: Path) -> Checkpoint:
    cfg = read_config(model_dir)
    tensors, files = read_tensors(model_dir)
    n = _num_hidden_layers(cfg)
    layers, shared = mtp_layers(tensors, n)
    return Checkpoint(str(model_dir), files, sum(tensors.values()), n, layers, shared)
