"""Test order for parallel runs: the longest files start first.

With pytest-xdist's ``--dist loadfile`` each file runs on one worker, and the files are
handed out in collection order, so a long file collected last runs alone at the end while
the other workers wait. The runtime tests (each a real vLLM engine), then the tests marked
``slow``, then the real-release tests go first; the many short files fill in behind them.
Within a file the order is unchanged. Order only: nothing is skipped or added."""

from __future__ import annotations

import pytest


def _rank(item: pytest.Item) -> int:
    for rank, mark in enumerate(("runtime", "slow", "release")):
        if item.get_closest_marker(mark) is not None:
            return rank
    return 3


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # A file takes the rank of its heaviest test, so its tests stay together.
    by_file: dict[str, int] = {}
    for item in items:
        path = str(item.path)
        by_file[path] = min(by_file.get(path, 3), _rank(item))
    items.sort(key=lambda item: by_file[str(item.path)])
