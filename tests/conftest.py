"""Test order for parallel runs: the longest files start first.

With pytest-xdist's ``--dist loadfile --no-loadscope-reorder`` each file runs on one worker,
and the files are handed out in collection order (without ``--no-loadscope-reorder`` xdist
hands out the files with the most tests first, whatever they cost), so a long file collected last runs alone at the end while
the other workers wait. The files measured longest go first, heaviest first; then the
runtime tests (each a real vLLM engine), the tests marked ``slow`` and the real-release
tests; the many short files fill in behind them.
Within a file the order is unchanged. Order only: nothing is skipped or added."""

from __future__ import annotations

from pathlib import Path

import pytest


def _rank(item: pytest.Item) -> int:
    for rank, mark in enumerate(("runtime", "slow", "release")):
        if item.get_closest_marker(mark) is not None:
            return rank
    return 3


# The files that took longest in a clean-clone CI run (seconds of test time, summed over the
# file, from the run's JUnit report, 2026-12-02 16:43), heaviest first: handed out first, they
# run while the short files fill the other workers, instead of starting last and running alone.
# (The runtime tests' shared engine runs are counted in the file that asked for them first.)
# A scheduling hint only; a file not listed is placed by its marks.
MEASURED_S = {
    "runtime/test_runtime_verdicts_patch.py": 627, "test_release_sweep.py": 575, "runtime/test_plan_agreement.py": 411,
    "runtime/test_runtime_sample.py": 293, "runtime/test_observer_serve.py": 283, "runtime/test_runtime_v2.py": 207,
    "runtime/test_runtime_compiled.py": 178, "test_fuzz.py": 114, "test_stable_ids_releases.py": 113,
    "test_engine_versions_agree.py": 110, "test_lint.py": 92, "test_layers_releases.py": 90, "test_history.py": 75,
    "test_history_layers.py": 65, "test_reports.py": 58, "test_plugin_release.py": 48,
    "test_heldout_reachability.py": 45, "test_layers_stepless_releases.py": 39, "test_heldout.py": 39,
}
TESTS = Path(__file__).resolve().parent


def _measured(item: pytest.Item) -> int:
    try:
        return MEASURED_S.get(Path(item.path).resolve().relative_to(TESTS).as_posix(), 0)
    except ValueError:
        return 0


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # A file takes the rank of its heaviest test, so its tests stay together.
    by_file: dict[str, tuple[int, int]] = {}
    for item in items:
        path = str(item.path)
        rank = min(by_file.get(path, (0, 3))[1], _rank(item))
        by_file[path] = (-_measured(item), rank)
    items.sort(key=lambda item: by_file[str(item.path)])


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: a run without xdist (-p no:xdist) has no such hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (README's test command): one worker more than this process may use CPUs, at
    least three, and no more than memory allows at ~2 GiB a worker (an engine run peaks near
    0.8 GB, a multi-release scan near 0.5 GB). The runtime tests wait on engine processes and
    the release tests on fetches, so a third worker on two CPUs keeps both busy; a larger
    machine gets more workers instead of three. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins."""
    import os

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        memory_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (ValueError, OSError, AttributeError):
        memory_gib = 8.0
    return max(3, min(cpus + 1, int(memory_gib // 2)))


# With MTP_AUDIT_TEST_CPU=FILE, each test's CPU seconds (this process's, plus the children it
# waited for: engine runs, CLI subprocesses) are appended to FILE as JSON lines, so a CI run
# says where the CPU goes, not only where the wall time goes (with more workers than cores the
# wall time of one test includes the others'). Measurement only: nothing is changed or skipped.
_CPU_LOG = __import__("os").environ.get("MTP_AUDIT_TEST_CPU")


def _cpu_now() -> tuple[float, float]:
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


if _CPU_LOG:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
        import json
        import time

        (s0, c0), t0 = _cpu_now(), time.perf_counter()
        yield
        (s1, c1), t1 = _cpu_now(), time.perf_counter()
        with open(_CPU_LOG, "a") as f:
            f.write(json.dumps({"test": item.nodeid, "self_s": round(s1 - s0, 2), "children_s": round(c1 - c0, 2),
                                "wall_s": round(t1 - t0, 2)}) + "\n")
