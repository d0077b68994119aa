"""The command line's fast exit (auditor.common.process_exit): what a normal exit does that the
outside can see still happens -- the exit code, every byte written, the atexit functions, a
thread that is still working -- only the teardown of the heap is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Output must stay in the process's buffers until the exit (PYTHONUNBUFFERED would write it at once).
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _run(body: str, tmp_path: Path, **kw) -> subprocess.CompletedProcess[bytes]:
    code = "import sys; sys.path.insert(0, %r)\nfrom auditor.common.process_exit import exit_process\n" % str(REPO)
    return subprocess.run([sys.executable, "-c", code + textwrap.dedent(body)], cwd=tmp_path, capture_output=True,
                          timeout=60, env=BUFFERED, **kw)


def test_output_and_code_survive(tmp_path):
    r = _run("""
        sys.stdout.write("x" * 3_000_000)  # more than any pipe or buffer holds
        sys.stderr.write("done")
        exit_process(3)
    """, tmp_path)
    assert r.returncode == 3
    assert len(r.stdout) == 3_000_000 and r.stderr == b"done"


def test_atexit_functions_and_finalizers_run(tmp_path):
    r = _run("""
        import atexit, tempfile
        atexit.register(lambda: open("atexit-ran", "w").close())
        d = tempfile.TemporaryDirectory(dir=".")  # removed by its finalizer at exit
        open("tmpdir", "w").write(d.name)
        exit_process(0)
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "atexit-ran").exists()
    assert not Path((tmp_path / "tmpdir").read_text()).exists()


def test_a_working_thread_is_waited_for(tmp_path):
    r = _run("""
        import threading, time
        def work():
            time.sleep(0.3)
            open("thread-finished", "w").close()
        threading.Thread(target=work).start()
        exit_process(1)
    """, tmp_path)
    assert r.returncode == 1 and (tmp_path / "thread-finished").exists()


def test_unflushable_stdout_is_an_error_without_a_traceback(tmp_path):
    # The reader of stdout is gone before the buffered output is flushed: never a silent
    # success (CPython's own exit says 120 with a message; so does this, without a traceback).
    script = tmp_path / "late.py"
    script.write_text(f"import sys, time; sys.path.insert(0, {str(REPO)!r})\n"
                      "from auditor.common.process_exit import exit_process\n"
                      "sys.stdout.write('buffered'); time.sleep(0.5); exit_process(0)\n")
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" "{script}" | true; echo "rc=${{PIPESTATUS[0]}}" >&2'],
                       capture_output=True, timeout=60, env=BUFFERED)
    assert r.stderr.split()[-1] == b"rc=120" and b"Traceback" not in r.stderr, r.stderr
