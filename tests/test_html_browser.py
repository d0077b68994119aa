"""The self-contained HTML pages of `layers --all` and `history --layers`, opened in a real
headless browser (Debian's chromium, which .ci/run installs): they render, and the
heat-map cells are there with their verdict classes after the browser parsed the page."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_history_report import _chromium
from test_layers import run_cli

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def _browser() -> str:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed; CI needs: apt-get install -y chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return browser


def _render(page: Path, name: str, tmp_path: Path) -> str:
    """Screenshot (kept in test-artifacts/) and the DOM as the browser built it."""
    browser = _browser()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    if shot.exists():
        shot.unlink()
    common = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    url = page.resolve().as_uri()
    run = subprocess.run([*common, f"--screenshot={shot}", "--window-size=1400,1000", url],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 5_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def test_layers_all_heat_map_renders_in_chromium(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from scan_helpers import write_tree

    from trees import gate_tree as _tree

    tree = write_tree(tmp_path / "t", _tree())
    out = tmp_path / "layers.html"
    env = {**os.environ, "MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    r = run_cli("layers", str(tree), "--all", "--format", "html", "-o", str(out), env=env)
    assert r.returncode == 0, r.stderr
    dom = _render(out, "layers-all", tmp_path)
    cells = re.findall(r'<td[^>]*class="(cell [a-z ]+)"', dom)
    assert cells.count("cell threaded") == 3 and cells.count("cell constant") == 3, cells
    assert "MultiModuleSpeculator" in dom and "EagleStyleSpeculator" in dom


def test_history_layers_page_renders_in_chromium(tmp_path):
    from test_history_layers import build_layer_repo, invoke

    repo = tmp_path / "repo"
    build_layer_repo(repo)
    page = tmp_path / "history-layers.html"
    res = invoke("history", repo, "--layers", "-f", "html", "-o", page, "--cache-dir", tmp_path / "cache", "-q")
    assert res.exit_code == 0, res.output
    dom = _render(page, "history-layers", tmp_path)
    cells = re.findall(r'<td[^>]*class="(cell [a-z ]+)"', dom)
    assert "cell threaded" in cells and "cell unknown" in cells, cells
    assert "DeepMTPModel" in dom and "QwenMTP" in dom
