"""Security: scanning never imports or executes the scanned code, the cache holds data only,
and report paths never leave the scanned root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from rules import all_rules
from scan_helpers import scan_tree, write_tree
from test_scan_cli import BAD_WRAPPER, run_cli

from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.source.trees import DirectoryTree

REPO = Path(__file__).resolve().parent.parent
WRAPPER_TEXT = BAD_WRAPPER["vllm/models/m_mtp.py"]


def _boom(marker: Path, tag: str) -> str:
    return (
        f"import pathlib; pathlib.Path({str(marker)!r}).joinpath({tag!r}).write_text('executed')\n"
        "import os; os._exit(99)\n"
    )


def plant_traps(root: Path, marker: Path) -> list[str]:
    """Every file that Python could run on import, start-up or test collection, each of which
    would leave a file in ``marker`` and kill the process. All mention the threaded
    parameter, so the scan parses them up front."""
    marker.mkdir(exist_ok=True)
    traps = {
        "vllm/__init__.py": "vllm-init",
        "vllm/models/__init__.py": "models-init",
        "vllm/models/m_mtp_helpers.py": "helpers",
        "vllm/__main__.py": "main",
        "vllm/conftest.py": "conftest",
        "conftest.py": "root-conftest",
        "setup.py": "setup",
        "sitecustomize.py": "sitecustomize",
        "usercustomize.py": "usercustomize",
        # modules a careless tool might import by name from the current directory
        "rules/__init__.py": "rules-shadow",
        "auditor/__init__.py": "auditor-shadow",
        "typer.py": "typer-shadow",
        "rich/__init__.py": "rich-shadow",
        "networkx.py": "networkx-shadow",
        "orjson.py": "orjson-shadow",
        "git/__init__.py": "git-shadow",
        "torch/__init__.py": "torch-shadow",
    }
    files = dict(BAD_WRAPPER)
    for rel, tag in traps.items():
        files[rel] = _boom(marker, tag) + "spec_step_idx = 0\n"
    files["vllm/models/m_mtp.py"] = "import vllm.models.m_mtp_helpers  # spec_step_idx\n" + WRAPPER_TEXT
    write_tree(root, files)
    pth = f"import pathlib; pathlib.Path({str(marker)!r}).joinpath('pth').write_text('x')\n"
    for rel in ("vllm/evil.pth", "evil.pth", "vllm/models/evil.pth"):
        (root / rel).write_text(pth)
    # a cache entry planted in the tree: the scan must not read it as a cache either
    (root / "vllm" / "models" / "payload.pkl").write_bytes(b"\x80\x04cos\nsystem\n.")
    return sorted(traps)


def test_scanned_code_is_never_imported_or_executed_cli(tmp_path):
    """The installed ``mtp-audit`` entry point, run from inside the scanned tree (its
    directory is the current directory), in every format, cold and warm."""
    root, marker = tmp_path / "tree", tmp_path / "executed"
    plant_traps(root, marker)
    exe = Path(sys.executable).with_name("mtp-audit")
    assert exe.exists()
    env = {**os.environ, "MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache"), "PYTHONSAFEPATH": ""}
    env.pop("PYTHONPATH", None)
    for fmt in ("json", "text", "sarif", "github", "json"):
        r = subprocess.run([str(exe), "scan", ".", "-q", "-f", fmt, "--workers", "2"], cwd=root,
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 1, (fmt, r.stdout[-2000:], r.stderr)
        assert not list(marker.iterdir()), sorted(p.name for p in marker.iterdir())
    for sub in (["graph", "."], ["explain", json.loads(
            subprocess.run([str(exe), "scan", ".", "-q", "-f", "json"], cwd=root, capture_output=True, text=True,
                           env=env).stdout)["findings"][0]["fingerprint"], "."]):
        r = subprocess.run([str(exe), *sub], cwd=root, capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, (sub, r.stderr)
    assert not list(marker.iterdir())


AUDIT = r"""
import os, sys
root = os.path.realpath(sys.argv[1])
events = []
def hook(event, args):
    if event == "exec":
        code = args[0]
        fn = getattr(code, "co_filename", "") or ""
        if fn and os.path.realpath(fn).startswith(root + os.sep):
            events.append(("exec", fn))
    elif event == "import":
        name, filename = args[0], args[1]
        if filename and os.path.realpath(filename).startswith(root + os.sep):
            events.append(("import", filename))
    elif event in ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn"):
        events.append((event, repr(args)[:200]))
sys.addaudithook(hook)
from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.source.trees import DirectoryTree
from rules import all_rules
before = set(sys.modules)
result = run_scan(DirectoryTree(__import__("pathlib").Path(root)), Config(), all_rules(), FactsCache(None), 1).result
from_tree = sorted(
    name for name, mod in list(sys.modules.items())
    if os.path.realpath(getattr(mod, "__file__", None) or "/-").startswith(root + os.sep)
)
print(__import__("json").dumps({"events": events, "from_tree": from_tree, "vllm": "vllm" in sys.modules,
                                "findings": [f.rule for f in result.findings]}))
"""


def test_scan_in_process_runs_nothing_from_the_tree(tmp_path):
    """An audit hook sees every code object executed and every module imported: none comes
    from the tree, no process is started, and ``sys.modules`` gains no module of the tree."""
    root, marker = tmp_path / "tree", tmp_path / "executed"
    plant_traps(root, marker)
    r = subprocess.run([sys.executable, "-c", AUDIT, str(root)], capture_output=True, text=True, timeout=300,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert doc["events"] == [] and doc["from_tree"] == [] and doc["vllm"] is False
    assert doc["findings"] == ["MTP001"]
    assert not list(marker.iterdir())


def test_sys_modules_gains_nothing_from_the_tree(tmp_path):
    root, marker = tmp_path / "tree", tmp_path / "executed"
    plant_traps(root, marker)
    before = dict(sys.modules)
    result = scan_tree(root).result
    assert [f.rule for f in result.findings] == ["MTP001"]
    new = {n: m for n, m in sys.modules.items() if n not in before}
    tree = str(root.resolve())
    assert not [n for n, m in sys.modules.items() if str(getattr(m, "__file__", None) or "").startswith(tree)]
    assert "vllm" not in new
    assert not list(marker.iterdir())


# --------------------------------------------------------------------------- the cache is data


def _all_cache_files(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file()]


def test_cache_holds_json_data_only(tmp_path):
    root, marker = tmp_path / "tree", tmp_path / "executed"
    plant_traps(root, marker)
    cache = tmp_path / "cache"
    for _ in range(2):  # cold (writes facts and the result), then warm
        r = run_cli("scan", str(root), "-q", "-f", "json", "--cache-dir", str(cache))
        assert r.returncode == 1, r.stderr
    files = _all_cache_files(cache)
    assert any("facts" in p.parts for p in files) and any("results" in p.parts for p in files)
    for p in files:
        raw = p.read_bytes()
        assert not raw.startswith(b"\x80"), p  # no pickle protocol header
        doc = json.loads(raw)
        assert isinstance(doc, dict) and set(doc) >= {"key"}, p
    # no serializer that can run code is even imported by the scan
    src = "\n".join(p.read_text() for p in (REPO / "auditor").rglob("*.py"))
    for forbidden in ("import pickle", "import marshal", "import shelve", "import dill", "cloudpickle", "yaml.load("):
        assert forbidden not in src, forbidden


def test_a_pickle_planted_in_the_cache_is_never_loaded(tmp_path):
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    cache = tmp_path / "cache"
    scan_tree(root, cache_dir=cache)
    marker = tmp_path / "unpickled"
    import pickle

    class Evil:
        def __reduce__(self):
            return (Path.write_text, (marker, "x"))

    for p in _all_cache_files(cache):
        p.write_bytes(pickle.dumps(Evil()))
    result = scan_tree(root, cache_dir=cache).result
    assert [f.rule for f in result.findings] == ["MTP001"]
    assert not marker.exists()


# --------------------------------------------------------------------------- paths stay inside


def _paths(doc: dict) -> list[str]:
    out = []
    for f in doc["findings"]:
        out.append(f["path"])
        out += [h["path"] for h in f["trace"]]
        out += [c["path"] for c in f["affected_classes"]]
    out += [p["path"] for p in doc["problems"]]
    for r in doc["reachability"]:
        out.append(r["class"]["path"])
        for lp in r["loops"]:
            out.append(lp["loop"].split(":")[0])
            out += [h["path"] for h in lp["trace"]]
    return out


def assert_paths_inside(doc: dict, root: Path) -> None:
    paths = _paths(doc)
    assert paths
    for p in paths:
        pp = PurePosixPath(p)
        assert not pp.is_absolute() and ".." not in pp.parts and p == pp.as_posix(), p
        assert p.startswith("vllm/") or p == "vllm", p
        full = (root / p)
        if full.is_symlink():  # a skipped link is reported where it is, never where it points
            continue
        assert full.resolve().is_relative_to(root.resolve()), p


def test_symlinks_out_of_the_tree_are_skipped_not_followed(tmp_path):
    outside = tmp_path / "outside"
    write_tree(outside, {"vllm/models/out_mtp.py": WRAPPER_TEXT})
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    os.symlink(outside / "vllm" / "models", root / "vllm" / "linked_models")
    os.symlink(outside / "vllm" / "models" / "out_mtp.py", root / "vllm" / "models" / "linked_mtp.py")
    os.symlink("../../..", root / "vllm" / "models" / "up")
    os.symlink("/", root / "vllm" / "rootfs")
    r = run_cli("scan", str(root), "-q", "-f", "json", "--no-cache")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    kinds = {p["path"]: p["kind"] for p in doc["problems"]}
    assert kinds == {"vllm/linked_models": "symlink", "vllm/models/linked_mtp.py": "symlink",
                     "vllm/models/up": "symlink", "vllm/rootfs": "symlink"}
    assert [f["path"] for f in doc["findings"]] == ["vllm/models/m_mtp.py"]
    assert_paths_inside(doc, root)
    sarif = json.loads(run_cli("scan", str(root), "-q", "-f", "sarif", "--no-cache").stdout)
    uris = [loc["physicalLocation"]["artifactLocation"]
            for res in sarif["runs"][0]["results"] for loc in res["locations"]]
    assert all(u["uriBaseId"] == "%SRCROOT%" and not u["uri"].startswith(("/", "..", "file:")) for u in uris)


def test_scanning_the_package_directory_reports_paths_from_the_root(tmp_path):
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    doc = json.loads(run_cli("scan", str(root / "vllm"), "-q", "-f", "json", "--no-cache").stdout)
    assert_paths_inside(doc, root)


@pytest.mark.release
def test_release_paths_stay_inside_the_root():
    from release_cache import release_root

    root = release_root("0.22.1")
    doc = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 2).result.to_json()
    assert doc["findings"]
    assert_paths_inside(doc, root)
