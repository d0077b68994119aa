"""--engine-mode parsing and its errors (no engine is started)."""

from __future__ import annotations

import pytest

from runtime_check.cli import RuntimeCheckError, _engine_modes

from .conftest import cli


def test_engine_modes_parse():
    assert _engine_modes("eager") == ["eager"]
    assert _engine_modes("eager,compiled,eager") == ["eager", "compiled"]
    with pytest.raises(RuntimeCheckError):
        _engine_modes("eager,jit")


@pytest.mark.parametrize("cmd", [["check", "--arch", "glm4_moe", "--k", "3"], ["matrix"]])
def test_bad_engine_mode_is_a_one_line_error(cmd):
    r = cli(*cmd, "--engine-mode", "bogus")
    assert r.returncode == 2
    assert r.stderr.strip() == "mtp-audit: error: --engine-mode must be eager, compiled or eager,compiled, not 'bogus'"
