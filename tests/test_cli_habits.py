"""What a new user meets at the command line: errors, help, files written, fix layout."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import write_tree  # noqa: E402

from rules._examples import draft_tree, wrapper  # noqa: E402

LOOP = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
MODEL = "vllm/models/m_mtp.py"


wrapper_calling = wrapper  # rules/_examples.py: a **kwargs wrapper whose forward body is the call


def cli(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "auditor.cli", *map(str, args)],
        capture_output=True, text=True, timeout=300, cwd=cwd, env={**os.environ, **(env or {})},
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "t", draft_tree(LOOP, model=wrapper_calling("return self.model(input_ids, positions, hidden_states)")))


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    "args, words",
    [
        (["scan", ".", "--format", "bogus"], ["'bogus' is not one of", "--format"]),
        (["scan", ".", "--workers", "0"], ["--workers"]),
        (["lint", "."], ["--base"]),
        (["scan", "--bogus"], ["no such option: --bogus"]),
        (["history"], ["missing argument 'REPO'"]),
        (["nosuchcommand"], ["no such command 'nosuchcommand'"]),
    ],
)
def test_usage_errors_are_one_line(tree, args, words):
    r = cli(*args, cwd=tree)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtp-audit: error: "), r.stderr
    for w in words:
        assert w in lines[0]


def test_version_and_short_help():
    from auditor import __version__

    r = cli("--version")
    assert r.returncode == 0 and r.stdout == f"mtp-audit {__version__}\n"
    short, long = cli("scan", "-h"), cli("scan", "--help")
    assert short.returncode == 0 and short.stdout == long.stdout


def test_help_text_renders_as_written():
    out = cli("scan", "-h").stdout
    assert "[tool.mtp-audit]" in out  # not eaten as markup
    assert "<bool>" not in out and "<list[str]>" not in out and "<path>" not in out
    assert "Usage: mtp-audit scan [OPTIONS] [PATH]" in out
    assert "Usage: mtp-audit releases import [OPTIONS] VERSION..." in cli("releases", "import", "-h").stdout
    for command in (["graph"], ["lint"], ["diff"], ["history"], ["bisect"], ["fix"], ["explain"], ["baseline", "create"]):
        text = cli(*command, "-h").stdout
        assert "{" not in text.split("\n", 1)[0], text  # usage line: no {ARG}
        options = text.split("Options:", 1)[1]
        # every option has a help text: no line of the options table is a bare flag
        for line in options.splitlines():
            if line.startswith("  -"):
                flag, _, help_ = line.strip().partition("  ")
                assert help_.strip() or options.split(line, 1)[1].startswith("\n      "), (command, line)


# --------------------------------------------------------------------------- runtime mount


def test_runtime_command_import_bug_surfaces(tmp_path):
    """A genuine ImportError inside runtime_check is a bug to show, not a command to hide
    (the command is imported when it is used)."""
    fake = tmp_path / "runtime_check"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "cli.py").write_text("from runtime_check.nowhere import app\n")
    code = "import sys; sys.path.insert(0, sys.argv[1]); sys.argv[1:2] = []; from auditor.cli import main; main()"
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path), "runtime", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "runtime_check.nowhere" in r.stderr, r.stderr


def test_runtime_command_absent_package_is_tolerated():
    code = (
        "import sys; sys.modules['runtime_check'] = None\n"
        "from auditor.cli.app import main\n"
        "main(sys.argv[1:])"
    )
    listed = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "releases" in listed.stdout and "runtime" not in listed.stdout, listed.stderr
    used = subprocess.run([sys.executable, "-c", code, "runtime", "--help"], capture_output=True, text=True, timeout=120)
    assert used.returncode == 2 and "no such command 'runtime'" in used.stderr, used.stderr


@pytest.mark.parametrize("command", [["scan", "{tree}", "--format", "json", "--no-cache"],
                                     ["layers", "{tree}", "--all", "--k", "2", "--format", "json", "--no-cache"]])
def test_a_json_answer_imports_no_heavy_library(tree, command):
    """Start-up cost is paid per command (tests and CI start ~150 of them): a JSON answer imports
    neither pydantic (typer 0.29 builds a pydantic TypeAdapter for every option: ~0.25 s, hence
    pyproject's typer<0.29) nor rich's console (the text renderers' library)."""
    code = (
        "import sys\n"
        "from auditor.cli.app import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic' or m == 'rich.console')\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    args = [a.format(tree=tree) for a in command]
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert r.stdout.lstrip().startswith("{"), r.stderr
    assert "HEAVY []" in r.stderr, r.stderr


# --------------------------------------------------------------------------- files written


def test_written_files_follow_the_umask(tree, tmp_path):
    cache = tmp_path / "cache"
    code = "import os, sys; os.umask(0o022); sys.argv = ['mtp-audit', *sys.argv[1:]]; from auditor.cli import main; main()"

    def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300)

    report, baseline = tmp_path / "report.json", tmp_path / "baseline.json"
    assert run("scan", tree, "-q", "-f", "json", "-o", report, "--cache-dir", cache).returncode == 1
    assert run("baseline", "create", tree, "-o", baseline, "--cache-dir", cache).returncode == 0
    for f in (report, baseline):
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f
    # a fixed source file keeps its own mode
    (tree / MODEL).chmod(0o755)
    assert run("fix", tree, "--cache-dir", cache).returncode == 0
    assert stat.S_IMODE((tree / MODEL).stat().st_mode) == 0o755
    assert "spec_step_idx=spec_step_idx" in (tree / MODEL).read_text()


@pytest.mark.parametrize(
    "target, words",
    [
        ("", "-o needs a file name"),
        ("/proc/version", "is read-only"),  # -r--r--r--: refused before any write is tried
        ("{tmp}/no/such/dir/r.txt", "does not exist"),
        ("{tmp}", "it is a directory"),
    ],
)
def test_odd_output_paths_are_explained(tree, tmp_path, target, words):
    r = cli("scan", tree, "-q", "-o", target.format(tmp=tmp_path), "--cache-dir", tmp_path / "cache")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert words in r.stderr


# --------------------------------------------------------------------------- fix


def test_fix_file_that_does_not_exist_is_an_error(tree):
    r = cli("fix", tree, "--diff", "--file", "vllm/models/missing.py")
    assert r.returncode == 2 and "--file vllm/models/missing.py: no such Python file" in r.stderr


ONE_PER_LINE = """return self.model(
            input_ids,
            positions,
            hidden_states,
        )"""
LONG = "return self.model(input_ids, positions, hidden_states)  # a comment that takes the line up to its limit ....."


@pytest.mark.parametrize(
    "call, limit, expected",
    [
        # one argument per line stays one argument per line
        (ONE_PER_LINE, None, """return self.model(
            input_ids,
            positions,
            hidden_states,
            spec_step_idx=spec_step_idx,
        )"""),
        # fits the project's line length (ruff's line-length = 100): joins the line
        ("return self.model(input_ids, positions, hidden_states)", 100,
         "return self.model(input_ids, positions, hidden_states, spec_step_idx=spec_step_idx)"),
        # too long for the line (88 by default): the arguments go on a line of their own,
        # and the signature gets one parameter per line
        (LONG, None, """return self.model(
            input_ids, positions, hidden_states, spec_step_idx=spec_step_idx
        )  # a comment that takes the line up to its limit ....."""),
    ],
)
def test_fix_follows_the_call_layout_and_line_length(tmp_path, call, limit, expected):
    root = write_tree(tmp_path / "t", draft_tree(LOOP, model=wrapper_calling(call)))
    if limit:
        (root / "pyproject.toml").write_text(f"[tool.ruff]\nline-length = {limit}\n")
    r = cli("fix", root, "--cache-dir", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    text = (root / MODEL).read_text()
    assert expected in text, text
    longest_before = max(len(line) for line in wrapper_calling(call).splitlines())
    assert max(len(line) for line in text.splitlines()) <= max(limit or 88, longest_before)
    if limit is None:
        assert "    def forward(\n        self,\n        input_ids,\n" in text and "        **kwargs,\n    ):" in text


# --------------------------------------------------------------------------- progress


def test_progress_lines_when_not_a_terminal_and_quiet_silences_them(tree, tmp_path):
    cache = tmp_path / "cache"
    r = cli("scan", tree, "-f", "json", "--cache-dir", cache)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines[0].startswith("mtp-audit: scanning ") and lines[-1].startswith("mtp-audit: scanned in ")
    assert "files parsed" in lines[-1]
    assert cli("scan", tree, "-f", "json", "--cache-dir", cache, "-q").stderr == ""

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for git_args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *git_args], cwd=tree, check=True, env={**os.environ, **env})
    r = cli("lint", ".", "--base", "HEAD", "--cache-dir", cache, cwd=tree)
    assert r.returncode == 0 and "mtp-audit: lint: scanning the work tree" in r.stderr
    assert "mtp-audit: 0 changed files, 0 new findings" in r.stderr
    r = cli("lint", ".", "--base", "HEAD", "--cache-dir", cache, "-q", cwd=tree)
    assert r.returncode == 0 and r.stderr == ""


def test_explain_keeps_code_lines_whole_when_piped(tmp_path):
    import json

    call = LONG  # a 110-column line
    root = write_tree(tmp_path / "t", draft_tree(LOOP, model=wrapper_calling(call)))
    cache = tmp_path / "cache"
    scan = cli("scan", root, "-q", "-f", "json", "--cache-dir", cache)
    fid = json.loads(scan.stdout)["findings"][0]["fingerprint"]
    text_report = cli("scan", root, "-q", "--cache-dir", cache).stdout
    assert f"[id {fid}]" in text_report  # the id `explain` takes is in the text report
    r = cli("explain", fid[:8], root, "--cache-dir", cache)
    assert r.returncode == 0, r.stderr
    assert any(line.endswith(call) and len(line) > 100 for line in r.stdout.splitlines()), r.stdout


def test_report_to_dev_null_leaves_the_device_alone(tmp_path, tree):
    """`-o /dev/null` writes into the device; an atomic rename would have replaced the
    device node with a regular file (it did, once, on a developer's machine)."""
    import stat as _stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(tree), "--no-cache", "-q", "-o", str(fifo)],
                       capture_output=True, text=True, timeout=120)
    out, _ = reader.communicate(timeout=60)
    assert r.returncode == 1, r.stderr  # the tree has a finding (a tree without MTP code is an error: exit 2)
    assert b"1 finding" in out
    assert _stat.S_ISFIFO(os.stat(fifo).st_mode)
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(tree), "--no-cache", "-q", "-o", "/dev/null"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert _stat.S_ISCHR(os.stat("/dev/null").st_mode)
