"""``--format sarif``: SARIF 2.1.0 (OASIS, errata 01) for GitHub code scanning.

The log is built from plain dicts rather than an object-model library: ``sarif-om``
(the only Python SARIF object model of note) has not been released since 2019, pulls in
``attrs`` and ``pbr``, and needs a custom serializer to drop its default-valued fields;
we emit a small subset of SARIF whose shape is fixed by the official JSON schema, and
the test suite validates every log against that schema.

Mapping:

* one run; ``tool.driver`` is ``mtp-audit`` with its version and one
  ``reportingDescriptor`` per rule (id = rule code, ``shortDescription`` = summary,
  ``fullDescription``/``help`` = the rule's documentation, ``defaultConfiguration.level``
  from its severity). A finding whose rule is unknown to the given rule list gets a
  minimal descriptor so that ``ruleIndex`` stays valid.
* one result per finding: ``ruleId``/``ruleIndex``/``level``/``message``; the location
  is ``artifactLocation.uri`` = the repo-relative path (percent-encoded) with
  ``uriBaseId`` ``%SRCROOT%``, ``region.startLine`` and ``region.startColumn``
  (1-based: ``Finding.column`` is 0-based, so +1); a logical location for the
  enclosing function; the call chain as one ``codeFlow``/``threadFlow`` (one location
  per trace hop, its note as the message); affected MTP classes as
  ``relatedLocations``; ``partialFingerprints["mtpAudit/v1"]`` = ``Finding.fingerprint``;
  suppressed findings carry ``suppressions: [{"kind": "inSource"}]``.
* skipped files (problems) are ``toolExecutionNotifications`` of the single invocation,
  which is ``executionSuccessful: true`` (a skipped file is reported, not fatal).
* ``lint`` (issue 18 item 10): the change's new findings carry ``baselineState: "new"``.
  Then one result per finding the change *fixed* and per by-design report it *removed*
  (a behaviour change, ``eagle-style -> threaded``), at the base's location, with
  ``baselineState: "absent"`` (SARIF 2.1.0 §3.27.24: in the baseline, not in this run),
  ``level: "none"`` and ``kind`` ``"pass"`` (fixed) or ``"informational"`` (a behaviour
  change: nothing was wrong, nothing was fixed), and ``properties.lintChange``
  (``"fixed"`` / ``"behaviour-change"``), ``properties.change`` (the kind) and, for a
  change, ``properties.steps`` (per MTP class: before, after). GitHub code scanning reads
  neither ``baselineState`` nor ``kind``; it does read ``suppressions``, so these results
  also carry an accepted external suppression whose justification says why: they never show
  as open alerts. A by-design report the change *adds* where the step was threaded is a new
  result whose ``properties.change`` is ``threaded -> eagle-style``. The run's
  ``properties.lint`` counts them against the base ref.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from auditor import __version__
from auditor.model.findings import BehaviourChange, Finding, Hop, LintChanges, Masked, Problem, ScanResult, Severity

from ._common import sorted_findings, sorted_problems

if TYPE_CHECKING:
    from rules.base import Rule

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "mtpAudit/v1"
TOOL_NAME = "mtp-audit"

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}


def _uri(path: str) -> str:
    """A repo-relative POSIX path as a relative URI reference (``%``, spaces, ``#`` ... escaped)."""
    return quote(path.replace("\\", "/"), safe="/-._~!$&'()*+=@")


def _artifact(path: str) -> dict[str, Any]:
    return {"uri": _uri(path), "uriBaseId": SRCROOT}


def _physical(path: str, line: int, column: int | None = None) -> dict[str, Any]:
    loc: dict[str, Any] = {"artifactLocation": _artifact(path)}
    if line >= 1:  # a region needs a real line; line 0 means "the whole file"
        region: dict[str, Any] = {"startLine": line}
        if column is not None and column >= 0:
            region["startColumn"] = column + 1
        loc["region"] = region
    return loc


def _root_uri(root: str) -> str | None:
    """``file:///abs/root/`` when the scan root is an absolute directory path, else None."""
    for flavour in (PurePosixPath, PureWindowsPath):
        p = flavour(root)
        if p.is_absolute() and (flavour is PurePosixPath or p.drive):
            uri = p.as_uri()
            return uri if uri.endswith("/") else uri + "/"
    return None


def _descriptor(rule: type["Rule"]) -> dict[str, Any]:
    doc = rule.doc()
    level = LEVEL.get(Severity(rule.severity), "warning")
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": doc, "markdown": doc},
        "help": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["mtp", "speculative-decoding", "spec_step_idx"]},
    }


def _unknown_descriptor(code: str, severity: Severity) -> dict[str, Any]:
    return {
        "id": code,
        "shortDescription": {"text": code},
        "defaultConfiguration": {"level": LEVEL.get(severity, "warning")},
    }


def _thread_location(hop: Hop, order: int) -> dict[str, Any]:
    text = f"{hop.function} — {hop.note}" if hop.note else hop.function
    return {
        "location": {
            "physicalLocation": _physical(hop.path, hop.line),
            "message": {"text": text or f"{hop.path}:{hop.line}"},
        },
        "executionOrder": order,
    }


def _result(f: Finding, index: int) -> dict[str, Any]:
    location: dict[str, Any] = {"physicalLocation": _physical(f.path, f.line, f.column)}
    if f.function:
        location["logicalLocations"] = [{"fullyQualifiedName": f.function, "kind": "function"}]
    res: dict[str, Any] = {
        "ruleId": f.rule,
        "ruleIndex": index,
        "level": LEVEL.get(f.severity, "warning"),
        "message": {"text": f.message or f.rule},
        "locations": [location],
    }
    if f.fingerprint:
        res["partialFingerprints"] = {FINGERPRINT_KEY: f.fingerprint}
    if f.trace:
        res["codeFlows"] = [
            {
                "message": {"text": f"call chain of {f.rule}"},
                "threadFlows": [{"locations": [_thread_location(h, i + 1) for i, h in enumerate(f.trace)]}],
            }
        ]
    if f.affected_classes:
        res["relatedLocations"] = [
            {
                "id": i + 1,
                "physicalLocation": {"artifactLocation": _artifact(ref.path)},
                "message": {"text": f"affected MTP class {ref.name}"},
            }
            for i, ref in enumerate(f.affected_classes)
        ]
    props: dict[str, Any] = {}
    if f.callee:
        props["callee"] = f.callee
    if f.affected_classes:
        props["affectedClasses"] = [str(ref) for ref in f.affected_classes]
    if props:
        res["properties"] = props
    if f.suppressed:
        res["suppressions"] = [{"kind": "inSource"}]
    return res


def _gone(f: Finding, index: int, kind: str, text: str, props: dict[str, Any]) -> dict[str, Any]:
    """A finding of the base that the change removed: ``baselineState: "absent"``."""
    res = _result(f, index)
    res.update({"level": "none", "kind": kind, "baselineState": "absent", "message": {"text": f"{text}: {res['message']['text']}"},
                "suppressions": [{"kind": "external", "status": "accepted", "justification": text}]})
    res.setdefault("properties", {}).update(props)
    return res


def _change_props(c: BehaviourChange) -> dict[str, Any]:
    return {"lintChange": "behaviour-change", "change": c.change,
            "steps": [{"class": str(s.model_class), "before": s.before, "after": s.after} for s in c.steps]}


def _lint_results(changes: LintChanges, index: dict[str, int]) -> list[dict[str, Any]]:
    out = [_gone(f, index[f.rule], "pass", f"fixed by the change (present at {changes.base})",
                 {"lintChange": "fixed"}) for f in sorted_findings(changes.fixed)]
    for c in sorted(changes.behaviour_changes, key=BehaviourChange.sort_key):
        if c.removed:  # an added report is one of the new results
            out.append(_gone(c.finding, index[c.finding.rule], "informational",
                             f"behaviour change {c.change} (by design, not a fix)", _change_props(c)))
    for m in sorted(changes.masked, key=Masked.sort_key):  # not fixed: a new finding hides it
        by = [str(b) for b in m.by]
        out.append(_gone(m.finding, index[m.finding.rule], "informational",
                         f"masked by {', '.join(by)} (not fixed: the step still does not reach its layer)",
                         {"lintChange": "masked", "maskedBy": by}))
    return out


def _notification(p: Problem) -> dict[str, Any]:
    return {
        "level": "warning",
        "message": {"text": f"skipped {p.path} ({p.kind}): {p.message}"},
        "descriptor": {"id": p.kind},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(p.path)}}],
    }


def build(result: ScanResult, rules: "list[type[Rule]]") -> dict[str, Any]:
    """The SARIF log as a dict (``render`` serializes it)."""
    findings = sorted_findings(result.findings)
    descriptors: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for rule in sorted(rules, key=lambda r: r.code):
        if rule.code not in index:
            index[rule.code] = len(descriptors)
            descriptors.append(_descriptor(rule))
    changes = result.lint
    gone = ([*changes.fixed, *(c.finding for c in changes.behaviour_changes), *(m.finding for m in changes.masked)]
            if changes else [])
    for f in [*findings, *sorted_findings(gone)]:  # rules the caller did not list, in first-seen (sorted) order
        if f.rule not in index:
            index[f.rule] = len(descriptors)
            descriptors.append(_unknown_descriptor(f.rule, f.severity))

    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": __version__,
                "semanticVersion": __version__,
                "rules": descriptors,
            }
        },
        "invocations": [
            {
                "executionSuccessful": True,
                "toolExecutionNotifications": [_notification(p) for p in sorted_problems(result.problems)],
            }
        ],
        "columnKind": "unicodeCodePoints",
        "results": [_result(f, index[f.rule]) for f in findings],
    }
    if changes is not None:
        _add_lint(run, changes)
        run["results"] += _lint_results(changes, index)
    root_uri = _root_uri(result.root)
    if root_uri:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": root_uri}}
    if result.roots:
        _name_plugin_roots(run, result)
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def _add_lint(run: dict[str, Any], changes: LintChanges) -> None:
    """Mark the new results as new (and an added by-design report with its change); count."""
    added = {c.finding.fingerprint: c for c in changes.behaviour_changes if not c.removed}
    for res in run["results"]:
        res["baselineState"] = "new"
        change = added.get(res.get("partialFingerprints", {}).get(FINGERPRINT_KEY, ""))
        if change is not None:
            res.setdefault("properties", {}).update(_change_props(change))
    removed = sum(1 for c in changes.behaviour_changes if c.removed)
    run["properties"] = {"lint": {"base": changes.base, "new": len(run["results"]), "fixed": len(changes.fixed),
                                  "behaviourChanges": len(changes.behaviour_changes), "masked": len(changes.masked),
                                  "absent": len(changes.fixed) + removed + len(changes.masked)}}


def _name_plugin_roots(run: dict[str, Any], result: ScanResult) -> None:
    """Issue 13: in a scan with platform plugins, every location in a plugin's file is
    relative to that plugin's own root (its own ``uriBaseId``, the root's name), so a
    plugin's CI can upload the log against its repository; vLLM's keep ``%SRCROOT%``."""
    from urllib.parse import unquote

    bases: dict[str, dict[str, Any]] = {}
    for r in result.roots:
        uri = _root_uri(r.location)
        bases[r.name if r.plugin else SRCROOT] = {"uri": uri} if uri else {"description": {"text": r.location}}

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            loc = node.get("artifactLocation")
            if isinstance(loc, dict) and "uri" in loc:
                owner = result.root_of(unquote(loc["uri"]))
                if owner is not None and owner.plugin:
                    loc["uriBaseId"] = owner.name
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(run.get("results", []))
    visit(run.get("invocations", []))
    run["originalUriBaseIds"] = bases


def render(result: ScanResult, rules: "list[type[Rule]]") -> str:
    return json.dumps(build(result, rules), indent=2) + "\n"
