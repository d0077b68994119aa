"""Users' files are sacred (issue 20): ``fix`` and every ``-o`` never defeat a read-only
mode, keep line endings, encoding, BOM and mode, write through a symbolic link to its
target and keep hard links."""

from __future__ import annotations

import codecs
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import write_tree  # noqa: E402

from rules._examples import PREDICTOR, draft_tree  # noqa: E402

LOOP = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
MODEL = "vllm/models/m_mtp.py"
WRAPPER = PREDICTOR + '''

class WrapperMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = Predictor(config)

    def forward(self, input_ids, positions, hidden_states, **kwargs):
        return self.model(input_ids, positions, hidden_states)
'''


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "t", draft_tree(LOOP, model=WRAPPER))


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert len(lines) == 1 and lines[0].startswith("mtp-audit: error: "), r.stderr
    assert "internal error" not in r.stderr
    return lines[0]


# --------------------------------------------------------------------------- fix


def test_fix_refuses_a_read_only_file_and_leaves_it_as_it_was(tree: Path, tmp_path: Path) -> None:
    model = tree / MODEL
    before = model.read_bytes()
    model.chmod(0o444)
    line = one_error_line(cli("fix", tree, "--cache-dir", tmp_path / "c"))
    assert "read-only" in line and MODEL in line
    assert model.read_bytes() == before
    assert stat.S_IMODE(model.stat().st_mode) == 0o444


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_fix_keeps_line_endings(tree: Path, tmp_path: Path, newline: str) -> None:
    model = tree / MODEL
    model.write_bytes(model.read_bytes().replace(b"\n", newline.encode()))
    assert cli("fix", tree, "--cache-dir", tmp_path / "c").returncode == 0
    raw = model.read_bytes()
    assert b"spec_step_idx=spec_step_idx" in raw
    text = raw.decode()
    assert text.count(newline) == text.count(newline[-1]) > 10  # every line end is as before


def test_fix_keeps_a_declared_encoding(tree: Path, tmp_path: Path) -> None:
    model = tree / MODEL
    latin = "# -*- coding: latin-1 -*-\n# caf\u00e9\n" + model.read_text()
    model.write_bytes(latin.encode("latin-1"))
    assert cli("fix", tree, "--cache-dir", tmp_path / "c").returncode == 0
    raw = model.read_bytes()
    assert raw.startswith(b"# -*- coding: latin-1 -*-\n# caf\xe9\n")
    assert b"spec_step_idx=spec_step_idx" in raw


def test_fix_keeps_a_utf8_bom(tree: Path, tmp_path: Path) -> None:
    model = tree / MODEL
    model.write_bytes(codecs.BOM_UTF8 + model.read_bytes())
    assert cli("fix", tree, "--cache-dir", tmp_path / "c").returncode == 0
    raw = model.read_bytes()
    assert raw.startswith(codecs.BOM_UTF8) and not raw[3:].startswith(codecs.BOM_UTF8)
    assert b"spec_step_idx=spec_step_idx" in raw


def test_fix_keeps_mode_and_hard_links(tree: Path, tmp_path: Path) -> None:
    model = tree / MODEL
    model.chmod(0o640)
    twin = tmp_path / "twin.py"
    os.link(model, twin)
    assert cli("fix", tree, "--cache-dir", tmp_path / "c").returncode == 0
    assert b"spec_step_idx=spec_step_idx" in twin.read_bytes()
    assert os.path.samefile(model, twin)
    assert stat.S_IMODE(model.stat().st_mode) == 0o640


# --------------------------------------------------------------------------- -o


def test_output_refuses_a_read_only_report(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("keep me\n")
    out.chmod(0o444)
    line = one_error_line(cli("scan", tree, "--format", "json", "-o", out, "--cache-dir", tmp_path / "c"))
    assert "read-only" in line
    assert out.read_text() == "keep me\n"


def test_output_writes_through_a_symlink_and_keeps_hard_links(tree: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    r = cli("scan", tree, "--format", "json", "-o", link, "--cache-dir", tmp_path / "c")
    assert r.returncode == 1, r.stderr
    assert link.is_symlink() and '"findings"' in real.read_text()
    twin = tmp_path / "twin.json"
    os.link(real, twin)
    cli("scan", tree, "--format", "sarif", "-o", real, "--cache-dir", tmp_path / "c")
    assert os.path.samefile(real, twin) and '"runs"' in twin.read_text()


def test_no_temp_file_is_left_beside_a_report(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "r" / "report.txt"
    out.parent.mkdir()
    cli("scan", tree, "-o", out, "--cache-dir", tmp_path / "c")
    assert [p.name for p in out.parent.iterdir()] == ["report.txt"]


def test_an_anonymous_temp_file_has_no_name_until_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write killed before its rename leaves nothing: the temp file is O_TMPFILE."""
    from auditor.common import safe_write

    if not safe_write._O_TMPFILE:
        pytest.skip("platform without O_TMPFILE")
    seen: list[list[str]] = []

    def fchmod(fd: int, mode: int) -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        raise KeyboardInterrupt  # the kill, in the middle of the write

    monkeypatch.setattr(safe_write.os, "fchmod", fchmod)
    with pytest.raises(KeyboardInterrupt):
        safe_write.write_file(tmp_path / "x.txt", "data")
    assert seen == [[]] and list(tmp_path.iterdir()) == []
