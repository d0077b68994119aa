"""MTP900: a suppression comment without a reason, or one that suppresses nothing."""

from __future__ import annotations

from typing import Iterable

from auditor.analysis import Analysis
from auditor.model import Finding, Severity

from ._examples import wrapper
from .base import Rule

_DROP = "return self.model(input_ids, positions, hidden_states)"


class SuppressionHygiene(Rule):
    """``# mtp-audit: ignore[MTP00x] <reason>`` on a finding's line, or on the ``def``
    line of the function it is in, suppresses it. The reason is required: a
    suppression without one suppresses nothing and is reported here. A suppression
    that no longer matches any finding is reported too, so stale ones get removed.

    The engine produces these findings after every other rule has run (it needs
    their results); this class carries the code's documentation and examples.
    """

    code = "MTP900"
    name = "suppression-hygiene"
    severity = Severity.NOTE
    summary = "Suppression comment without a reason, or one that no longer suppresses anything"

    VALID = [
        {"vllm/models/m_mtp.py": wrapper(_DROP + "  # mtp-audit: ignore[MTP001] single-layer checkpoints only")},
    ]
    INVALID = [
        {"vllm/models/m_mtp.py": wrapper(_DROP + "  # mtp-audit: ignore[MTP001]")},
        {"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)"
                                         "  # mtp-audit: ignore[MTP001] stale")},
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        return ()
