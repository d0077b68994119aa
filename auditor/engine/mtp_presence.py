"""Is there vLLM MTP code in a tree at all? A tree where no model class selects its layer
by the draft step is not a clean vLLM: it is the wrong tree (another project, a docs-only
checkout, a plugin given as PATH). ``scan`` says so (exit 2); ``history`` skips it."""

from __future__ import annotations

from ..common.errors import UsageError
from ..model.findings import ScanResult

NO_MTP_CODE = "no MTP code found"


def has_mtp_code(result: ScanResult) -> bool:
    """Some class selects an MTP layer by the step (the reachability table lists it), or a rule found something."""
    return bool(result.reachability) or bool(result.findings)


#: problems that may hide MTP code (a file the scan could not see into)
HIDING = ("parse-error", "decode-error", "unreadable", "too-large")


def hidden_files(result: ScanResult) -> list[str]:
    return sorted(p.path for p in result.problems if p.kind in HIDING)


def require_mtp_code(result: ScanResult, label: str) -> None:
    """UsageError for a tree without MTP code. Not when some file could not be read or
    parsed: the MTP code may be in it, and the report lists it (the user must see that)."""
    if not has_mtp_code(result) and not hidden_files(result):
        raise UsageError(
            f"{NO_MTP_CODE} in {label}: no model class selects its layer by the draft step "
            f"(is this a vLLM source tree? give the directory that holds vllm/)")
