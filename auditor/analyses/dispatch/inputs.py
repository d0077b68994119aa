"""What a user hands ``layers``, read the way vLLM reads it (issue 18).

* ``--speculative-config JSON``: the JSON object ``vllm serve --speculative-config`` takes
  (``{"method": "mtp", "num_speculative_tokens": 3, "draft_sample_method": "probabilistic",
  "use_local_argmax_reduction": true, ...}``). The method and K are the dispatch roles
  (``dispatch-roles``: ``method``, ``k``); every other key is set on the speculative config
  as given, so the factories, predicates and validations that read it see it. A JSON file
  path is accepted too (``@file.json`` or a path to an existing file).
* ``--hf-config PATH``: a target ``config.json``, or a model directory holding one
  (:data:`CONFIG_NAME`; read by :func:`auditor.services.layers.read_hf_config`).

Bad input is a :class:`~auditor.errors.UsageError` (one line, exit 2), never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...common.errors import UsageError

CONFIG_NAME = "config.json"


@dataclass(frozen=True)
class SpeculativeInput:
    method: str | None
    k: int | None
    options: tuple[tuple[str, Any], ...]  # every other key, sorted, as given


def parse_speculative_config(text: str, method_key: str = "method", k_key: str = "num_speculative_tokens") -> SpeculativeInput:
    """The speculative config a user gives, as JSON text, ``@path`` or a path to a JSON file."""
    raw = text.strip()
    source = "--speculative-config"
    candidate = raw[1:] if raw.startswith("@") else raw
    if raw.startswith("@") or (not raw.startswith("{") and Path(candidate).is_file()):
        try:
            raw = Path(candidate).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{source}: cannot read {candidate}: {exc}") from None
        source = candidate
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a JSON object like {{\"method\": \"mtp\", \"num_speculative_tokens\": 3}}")
    method = data.pop(method_key, None)
    if method is not None and not isinstance(method, str):
        raise UsageError(f"{source}: {method_key} must be a string, got {json.dumps(method)}")
    k = data.pop(k_key, None)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise UsageError(f"{source}: {k_key} must be a positive integer, got {json.dumps(k)}")
    return SpeculativeInput(method, k, tuple(sorted(data.items())))
