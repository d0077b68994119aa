"""--engine-mode parsing and its errors (no engine is started)."""

from __future__ import annotations

import pytest

from runtime_check.cli import RuntimeCheckError, _engine_modes, _modes

from .conftest import cli


def test_engine_modes_parse():
    assert _engine_modes("eager") == ["eager"]
    assert _engine_modes("eager,compiled,eager") == ["eager", "compiled"]
    with pytest.raises(RuntimeCheckError):
        _engine_modes("eager,jit")


def test_loop_modes_parse():
    # False: the loop as vLLM ships it; True: forced (spec_step_idx=j on draft step j)
    assert _modes(None, False) == [False] and _modes(None, True) == [True]
    assert _modes("both", False) == [False, True] and _modes("forced,shipped,forced", False) == [True, False]
    for bad in ("", "forced,jit", "all"):
        with pytest.raises(RuntimeCheckError, match="--mode must be shipped, forced or both"):
            _modes(bad, False)
    with pytest.raises(RuntimeCheckError, match="not both"):
        _modes("forced", True)


def test_bad_mode_is_a_one_line_error():
    r = cli("check", "--arch", "glm4_moe", "--k", "3", "--mode", "bogus")
    assert r.returncode == 2
    assert r.stderr.strip() == "mtp-audit: error: --mode must be shipped, forced or both, not 'bogus'"


@pytest.mark.parametrize("cmd", [["check", "--arch", "glm4_moe", "--k", "3"], ["matrix"]])
def test_bad_engine_mode_is_a_one_line_error(cmd):
    r = cli(*cmd, "--engine-mode", "bogus")
    assert r.returncode == 2
    assert r.stderr.strip() == "mtp-audit: error: --engine-mode must be eager, compiled or eager,compiled, not 'bogus'"



def test_every_runtime_command_takes_q(tmp_path):
    """-q works on every command (issue 20): each takes it, and what it then prints is the
    command's own answer or one-line error, never a usage error about -q."""
    r = cli("envs", "-q")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = cli("observed", str(tmp_path / "missing.jsonl"), "-q")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing.jsonl" in r.stderr, r.stderr
    for cmd in (["check", "--arch", "glm4_moe", "--k", "3"], ["matrix"]):
        r = cli(*cmd, "-q", "--engine-mode", "bogus")
        assert r.returncode == 2 and r.stderr.strip().endswith("not 'bogus'"), r.stderr
    r = cli("synth", "--help")
    assert r.returncode == 0 and "--quiet" in r.stdout


@pytest.mark.parametrize("args,error", [
    (["--arch", "glm4_moe", "--model", "/nonexistent", "--k", "3"], "give --arch or --model, not both"),
    (["--k", "3"], "give --arch (one or more) or --model"),
    # every --arch is checked before any engine starts
    (["--arch", "glm4_moe", "--arch", "llama9", "--k", "3"], "unknown architecture 'llama9'"),
])
def test_check_target_errors_are_one_line(args, error):
    r = cli("check", *args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"mtp-audit: error: {error}"), r.stderr
