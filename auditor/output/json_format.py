"""``--format json``: the ``ScanResult.to_json()`` document, schema version 1.

Every field is documented in ``JSON_FORMAT.md``; ``scan-result.schema.json`` (JSON
Schema 2020-12) describes the same document and the test suite validates against it.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

from auditor.model.findings import ScanResult

from ._common import sorted_findings, sorted_problems, sorted_reachability

SCHEMA_FILE = "scan-result.schema.json"


def render(result: ScanResult) -> str:
    # Sort copies of the lists (the documented order) without touching the caller's result.
    ordered = dataclasses.replace(
        result,
        findings=sorted_findings(result.findings),
        problems=sorted_problems(result.problems),
        reachability=sorted_reachability(result.reachability),
    )
    return json.dumps(ordered.to_json(), indent=2, sort_keys=True) + "\n"


def load_schema() -> dict[str, Any]:
    """The JSON Schema of the ``--format json`` document."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
