"""History reports: JSON document, GitHub markdown, one self-contained HTML file (checked in a headless browser)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_history import build_repo

from auditor.services.history import run_history
from auditor.output.history import chart_svg, render, to_json
from rules import all_rules

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO_ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    base = tmp_path_factory.mktemp("report")
    build_repo(base / "repo")
    return run_history(base / "repo", cache_dir=base / "cache", workers=1, rules=all_rules())


def test_json_document(hist):
    doc = to_json(hist)
    assert doc["version"] == 1 and doc["kind"] == "history"
    assert set(doc) == {"version", "kind", "tool", "repository", "rules", "releases", "layer_matrix"}
    skipped, first, *rest = doc["releases"]
    assert skipped["status"] == "skipped" and skipped["skip_reason"] and "findings" not in skipped
    assert first["base"] is None and first["introduced"] == [f["fingerprint"] for f in first["findings"]]
    for rel in rest:
        fps = {f["fingerprint"] for f in rel["findings"]}
        assert set(rel["introduced"]) | set(rel["persisted"]) == fps
        assert not set(rel["introduced"]) & set(rel["persisted"])
        assert rel["counts"]["findings"] == len(fps)
        assert sum(rel["counts"]["by_rule"].values()) == len(fps)
    assert doc["layer_matrix"]["releases"] == ["v0.1.0", "v0.2.0", "v0.3.0", "v0.4.0"]
    assert render(hist, "json") == render(hist, "json")  # deterministic
    json.loads(render(hist, "json"))


def test_markdown_is_plain_github_markdown(hist):
    md = render(hist, "markdown")
    assert md.startswith("# ")
    assert "## Does draft step i reach MTP layer i?" in md
    assert "| WrapperMTP | ✗ | ✗ | ✓ | ✓ |" in md
    assert "**skipped**" in md
    assert not re.search(r"<(?!\\)[a-zA-Z/]", md.replace("\\<", "")), "no raw HTML in the markdown report"
    tables, current = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    tables += [current] if current else []
    assert len(tables) >= 4
    for table in tables:
        assert table[1].startswith("|---"), table[:2]
        width = table[1].count("|---")
        for row in table:
            assert len(re.split(r"(?<!\\)\|", row)) - 2 == width, row


def test_html_is_self_contained(hist):
    page = render(hist, "html")
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page and "<polyline" in page and "<details" in page
    assert not re.search(r"https?://|//cdn|<link\b|\bsrc=|@import|url\(", page), "the report must not fetch anything"
    assert page.count("<script>") == 1 and page.count("<style>") == 1
    assert 'id="matrix"' in page and 'id="summary"' in page
    assert "skipped" in page


def test_html_escapes_untrusted_text(hist):
    rel = hist.releases[1]
    original = rel.subject
    rel.subject = '<script>alert(1)</script> & "x"'
    try:
        page = render(hist, "html")
    finally:
        rel.subject = original
    assert "<script>alert(1)" not in page and html.escape('<script>alert(1)</script>') in page


def test_chart_has_one_series_per_rule_and_a_total(hist):
    svg = chart_svg(hist)
    rules = sorted({f.rule for r in hist.scanned() for f in r.result.findings})
    assert re.findall(r'data-rule="([^"]+)"', svg) == ["total", *rules]
    assert svg.count("<circle") == (len(rules) + 1) * len(hist.scanned())


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_html_renders_in_headless_chromium(hist, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed; CI needs: apt-get install -y chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / "history.html"
    page.write_text(render(hist, "html"), encoding="utf-8")
    shot = ARTIFACTS / "history.png"
    if shot.exists():
        shot.unlink()
    common = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    url = page.resolve().as_uri()
    run = subprocess.run(
        [*common, f"--screenshot={shot}", "--window-size=1400,2000", url], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    out = dom.stdout
    assert re.search(r'<svg[^>]*id="chart"', out) and "<polyline" in out
    assert re.search(r'<table[^>]*id="summary"', out) and re.search(r'<table[^>]*id="matrix"', out)
    assert "WrapperMTP" in out and "✓" in out and "✗" in out
    assert "<details" in out and "OtherMTP.forward" in out
