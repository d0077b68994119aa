"""Reports a reviewer can read (issue 20)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rules import all_rules

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.release
def test_rules_lists_the_severity_findings_have_on_a_release() -> None:
    import json

    from release_cache import release_root

    r = cli("scan", str(release_root("0.33.0")), "-q", "-f", "json")
    findings = json.loads(r.stdout)["findings"]
    listed = {line.split()[0]: line.split()[1] for line in cli("rules").stdout.splitlines()}
    by_rule: dict[str, set[str]] = {}
    for f in findings:
        by_rule.setdefault(f["rule"], set()).add(f["severity"])
    assert "MTP007" in by_rule
    for code, severities in by_rule.items():
        assert severities == {listed[code]}, (code, severities, listed[code])


def test_every_finding_of_a_rule_example_has_a_severity_the_rule_declares() -> None:
    from scan_helpers import scan_tree, write_tree

    for rule in all_rules():
        for i, example in enumerate(getattr(rule, "INVALID", ())):
            files = getattr(example, "files", None)
            if not files:
                continue
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                root = write_tree(Path(tmp), files)
                for f in scan_tree(root).result.findings:
                    if f.rule == rule.code:
                        assert f.severity in rule.severities(), (rule.code, i, f.severity)


def relative_links(md: Path) -> list[str]:
    text = md.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    links = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)
    return [l for l in links if not re.match(r"^[a-z][a-z0-9+.-]*:", l) and not l.startswith("#")]


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for md in docs:
        for link in relative_links(md):
            target = (md.parent / link.split("#", 1)[0]).resolve()
            if not target.exists():
                broken.append(f"{md.relative_to(REPO)} -> {link}")
    assert broken == []


def test_readme_is_at_most_250_lines_and_runtime_detail_lives_in_docs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 250, len(readme)
    assert (REPO / "docs" / "runtime.md").is_file()
    assert any("docs/runtime.md" in line for line in readme)


@pytest.mark.release
def test_the_text_report_of_a_release_fits_in_150_lines() -> None:
    from release_cache import release_root

    r = cli("scan", str(release_root("0.33.0")), "-q")
    lines = r.stdout.splitlines()
    assert len(lines) <= 150, len(lines)
    # affected classes are summarised: no class list of 30+ lines, none repeated
    assert not any(line.strip() == "affected MTP classes:" for line in lines)
    # the warm-up loop is a line of its loop's finding, not a finding of its own
    heads = [line for line in lines if line.startswith("  MTP")]
    assert not any("dummy_run" in h for h in heads)
    assert any(line.startswith("    also ") and "dummy_run" in line for line in lines)
    # the limits note names the option that raises them
    note = [line for line in lines if line.startswith("note: the search stopped")]
    assert note and "[tool.mtp-audit.search-limits]" in note[0]


@pytest.mark.release
def test_verbose_text_lists_every_class_and_hop() -> None:
    from auditor.output import render
    from scan_helpers import scan_release

    result = scan_release("0.33.0").result
    full = render(result, "text", verbose=True)
    for f in result.findings:
        for ref in f.affected_classes:
            assert f"      {ref.name}  ({ref.path})" in full
    assert "dummy_run" in "".join(line for line in full.splitlines() if line.startswith("  MTP"))


def test_search_limits_are_read_from_the_configuration(tmp_path: Path) -> None:
    from auditor.common.config import load_config
    from auditor.common.errors import ConfigError

    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.mtp-audit.search-limits]\n"draft loop call depth" = 20\n')
    assert load_config(cfg).search_limits == {"draft loop call depth": 20}
    cfg.write_text('[tool.mtp-audit.search-limits]\n"no such limit" = 20\n')
    with pytest.raises(ConfigError, match="unknown limit"):
        load_config(cfg)


@pytest.mark.release
def test_raising_a_limit_lets_the_search_go_further() -> None:
    from auditor.facts.cache import FactsCache
    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.source.trees import DirectoryTree
    from release_cache import release_root

    tree = DirectoryTree(release_root("0.33.0"))
    cache = FactsCache(None)
    low = run_scan(tree, Config(search_limits={"held-module depth": 1}), all_rules(), cache, 1).result
    high = run_scan(DirectoryTree(release_root("0.33.0")), Config(search_limits={"held-module depth": 4}),
                    all_rules(), cache, 1).result
    assert low.stats["limits_hit"].get("held-module depth", 0) > high.stats.get("limits_hit", {}).get("held-module depth", 0)


@pytest.mark.release
def test_fix_keeps_a_formatter_clean_release_file_clean(tmp_path: Path) -> None:
    """qwen3_next_mtp.py and qwen3_5_mtp.py of 0.33.0 are ruff-format clean; fixed, they
    stay so (one argument per line with a magic trailing comma, as ruff and black write)."""
    import shutil

    from release_cache import release_root

    src = release_root("0.33.0")
    shutil.copytree(src / "vllm", tmp_path / "vllm", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    files = ["vllm/model_executor/models/qwen3_next_mtp.py", "vllm/model_executor/models/qwen3_5_mtp.py"]
    ruff = [sys.executable, "-m", "ruff", "format", "--check", "--line-length", "88", *files]
    assert subprocess.run(ruff, cwd=tmp_path, capture_output=True, text=True).returncode == 0
    before = [(tmp_path / f).read_text() for f in files]
    cli("fix", str(tmp_path), "-q")
    assert [(tmp_path / f).read_text() for f in files] != before  # both were fixed
    r = subprocess.run(ruff, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
