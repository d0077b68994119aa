"""Every cache entry carries a digest of its content and of the key it answers (issue 20):
a truncated, edited or differently-shaped entry is a miss, is removed, and is recomputed —
never printed as the answer, never an internal error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scan_helpers import write_tree

from auditor.common.cache_entry import seal, unseal
from trees import gate_tree as _tree
from test_scan_cli import BAD_WRAPPER

TWO_DROPS = {
    **BAD_WRAPPER,
    "vllm/models/n_mtp.py": BAD_WRAPPER["vllm/models/m_mtp.py"].replace("WrapperMTP", "OtherMTP"),
}


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "MTP_AUDIT_CACHE_DIR": "/nonexistent-use-cache-dir"})


def entries(cache: Path, folder: str) -> list[Path]:
    return sorted(p for p in (cache / folder).rglob("*") if p.is_file())


def test_a_sealed_entry_verifies_only_for_its_own_key_and_bytes() -> None:
    raw = seal("k1", b'{"a": 1}')
    assert unseal("k1", raw) == b'{"a": 1}'
    assert unseal("k2", raw) is None
    assert unseal("k1", raw[:-1]) is None
    assert unseal("k1", raw.replace(b"1}", b"2}")) is None
    assert unseal("k1", b'{"a": 1}') is None


def test_an_edited_result_entry_with_fewer_findings_is_not_trusted(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", TWO_DROPS)
    cache = tmp_path / "cache"
    args = ("scan", root, "-q", "-f", "json", "--cache-dir", cache)
    first = cli(*args)
    assert first.returncode == 1 and len(json.loads(first.stdout)["findings"]) == 2
    [entry] = entries(cache, "results")
    raw = entry.read_bytes()
    payload = unseal(entry.stem, raw)
    assert payload is not None
    doc = json.loads(payload)
    doc["result"]["findings"] = doc["result"]["findings"][:1]
    header = raw.partition(b"\n")[0]
    entry.write_bytes(header + b"\n" + json.dumps(doc).encode())  # hand-edited, old digest
    again = cli(*args)
    assert again.stdout == first.stdout and again.returncode == 1
    assert unseal(entry.stem, entry.read_bytes()) is not None  # removed and written anew


def test_a_result_entry_of_the_wrong_shape_is_a_miss_not_an_internal_error(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", TWO_DROPS)
    cache = tmp_path / "cache"
    args = ("scan", root, "-q", "-f", "json", "--cache-dir", cache)
    first = cli(*args)
    [entry] = entries(cache, "results")
    key = entry.stem
    shapes = [
        {"key": key, "result": {"root": ".", "findings": [{"rule": []}], "problems": [], "stats": {}}},
        {"key": key, "result": {"root": ".", "findings": "x", "problems": 3, "stats": []}},
        {"key": key, "result": {"root": ".", "findings": [], "problems": [], "stats": {"files": {"x": [1]}}}},
    ]
    for doc in shapes:
        for text in (json.dumps(doc), "[" * 100_000 + "]" * 100_000):
            # unsealed (as a hand or an older build wrote it), and sealed: only the shape is wrong
            for raw in (text.encode(), seal(key, text.encode())):
                entry.write_bytes(raw)
                r = cli(*args)
                assert (r.returncode, r.stdout, r.stderr) == (1, first.stdout, ""), text[:80]


def test_a_truncated_or_edited_layers_entry_is_recomputed(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", _tree())
    cache = tmp_path / "cache"
    args = ("layers", root, "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "3",
            "--runner", "v2", "-f", "json", "--cache-dir", cache)
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    [entry] = entries(cache, "layers")
    raw = entry.read_bytes()
    for damaged in (raw[: len(raw) // 2], raw.replace(b'"layer"', b'"LAYER"'), first.stdout.encode()):
        entry.write_bytes(damaged)
        again = cli(*args)
        assert (again.returncode, again.stdout) == (0, first.stdout)
        assert entry.read_bytes() == raw  # the damaged entry was removed and written again


def test_facts_holding_a_lone_surrogate_are_kept_in_memory_not_cached(tmp_path: Path) -> None:
    """A string literal may spell a lone surrogate (``"\\ud800"``, as vLLM's tokenizer tests do):
    its facts cannot be encoded as UTF-8 JSON. The cache leaves them out (a write failure), the
    scan goes on with them, and a second read is a miss, not an internal error."""
    from auditor.facts.cache import FactsCache
    from auditor.facts.extract import extract

    facts = extract('X = "\\ud800"\n\ndef f():\n    return "\\udfff" + X\n', "vllm/s.py", "vllm.s", False)
    cache = FactsCache(tmp_path / "cache")
    cache.put("k" * 64, facts)
    assert cache.write_failures == 1
    assert cache.get("k" * 64, "vllm/s.py") is None
