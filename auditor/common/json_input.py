"""JSON a user hands the tool (``--hf-config``, ``--set FIELD=VALUE``): one-line errors.

``json.loads`` raises RecursionError, not ValueError, for deeply nested input; both are
the user's input, not the tool's fault."""

from __future__ import annotations

import json
from typing import Any

from .errors import UsageError


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{what}: JSON nested too deeply") from None
    except ValueError as exc:
        raise UsageError(f"{what}: not valid JSON ({exc})") from None
