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
