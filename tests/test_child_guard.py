"""Pool workers die with their parent, even on ``kill -9`` (issue 20)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from scan_helpers import write_tree

SCRIPT = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    import auditor.index.index as ix
    real = ix._extract_worker
    def slow(task):
        time.sleep(120)  # a worker stuck in its task when the parent is killed
        return real(task)
    ix._extract_worker = slow
    from auditor.facts.cache import FactsCache
    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.source.trees import DirectoryTree
    from rules import all_rules
    run_scan(DirectoryTree(Path(sys.argv[1])), Config(), all_rules(), FactsCache(None), 2)
''')


def children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out |= {int(c) for c in (task / "children").read_text().split()}
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_workers_die_when_the_scan_is_killed(tmp_path: Path) -> None:
    files = {f"vllm/m{i}.py": f"def f{i}(spec_step_idx):\n    return spec_step_idx\n" for i in range(30)}
    files["vllm/loop.py"] = "".join(f"from vllm.m{i} import f{i}\n" for i in range(30))
    root = write_tree(tmp_path / "t", files)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(root)], cwd=Path(__file__).parent.parent)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers) < 2:
            workers = children(proc.pid)
            time.sleep(0.2)
        assert len(workers) >= 2, "the scan never started its pool"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(w) for w in workers):
            time.sleep(0.2)
        assert not [w for w in workers if alive(w)]
    finally:
        for w in workers:  # what the test started does not outlive it, whatever happened
            if alive(w):
                os.kill(w, signal.SIGKILL)
        proc.kill()
