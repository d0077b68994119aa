"""Platform plugins (issue 13): vLLM scanned together with a plugin that subclasses,
registers and monkeypatches its classes.

Each fixture is a small vLLM tree plus a small plugin tree written by the test. A
VALID plugin leaves no finding; an INVALID one has the finding expected where the
plugin's code runs (in the plugin's file, with the plugin's root named), and a finding
in vLLM's code that the plugin replaced disappears.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from auditor.analyses import PluginProvider
from auditor.analyses.analysis import Analysis
from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import Scan, run_scan
from auditor.index.index import Index
from auditor.source.trees import CombinedTree, DirectoryTree, Root, locate_plugin
from rules import all_rules
from scan_helpers import write_tree

# --------------------------------------------------------------------------- fixture trees

PREDICTOR = '''
import torch.nn as nn


class FooPredictor(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, input_ids, hidden_states, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](hidden_states)


class FooMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = FooPredictor(config)

    def forward(self, input_ids, hidden_states, spec_step_idx: int = 0):
        return self.model(input_ids, hidden_states, {step})
'''

PROPOSER = '''
from vllm.loader import get_model


class Proposer:
    def __init__(self, config):
        self.num_speculative_tokens = config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.config)

    def propose(self, input_ids, hidden_states):
        out = []
        for step in range(self.num_speculative_tokens):
            hidden_states = self.model(input_ids, hidden_states, spec_step_idx=step)
            out.append(hidden_states)
        return out
'''

THREADS = "spec_step_idx"  # FooMTP.forward passes the step on
DROPS = "0"  # ... or drops it (MTP001 in vLLM's file)


def vllm_files(step: str = THREADS) -> dict[str, str]:
    return {
        "vllm/loader.py": "def get_model(config):\n    raise NotImplementedError\n",
        "vllm/model_executor/models/registry.py": '_SPECULATIVE_DECODING_MODELS = {"FooMTPModel": ("foo_mtp", "FooMTP")}\n',
        "vllm/model_executor/models/foo_mtp.py": PREDICTOR.replace("{step}", step),
        "vllm/spec_decode/proposer.py": PROPOSER,
        "vllm/model_executor/models/__init__.py": "class ModelRegistry:\n    @staticmethod\n    def register_model(arch, cls):\n        pass\n",
    }


PLUGIN_PYPROJECT = '''
[project]
name = "vllm-myplug"
version = "1.0"

[project.entry-points."vllm.platform_plugins"]
myplug = "myplug:register"
'''

IMPORTS = "from vllm.model_executor.models.foo_mtp import FooMTP\n\n\n"


def patched_forward(step: str) -> str:
    return f'''
def patched_forward(self, input_ids, hidden_states, spec_step_idx: int = 0):
    hidden_states = hidden_states * 2
    return self.model(input_ids, hidden_states, {step})
'''


# The three patch forms, each with the patched function threading (valid) or dropping
# (invalid) the step.
def module_level_patch(step: str) -> dict[str, str]:
    return {
        "myplug/__init__.py": "def register():\n    import myplug.patch_foo  # noqa: F401\n    return 'myplug.platform.P'\n",
        "myplug/patch_foo.py": IMPORTS + patched_forward(step) + "\n\nFooMTP.forward = patched_forward\n",
    }


def patch_function_patch(step: str) -> dict[str, str]:
    return {
        "myplug/__init__.py": "from myplug.patches import apply_patches\n\n\ndef register():\n    apply_patches()\n    return 'myplug.platform.P'\n",
        "myplug/patches.py": IMPORTS + patched_forward(step) + "\n\ndef apply_patches():\n    FooMTP.forward = patched_forward\n",
    }


def setattr_patch(step: str) -> dict[str, str]:
    return {
        "myplug/__init__.py": "def register():\n    import myplug.patch_foo  # noqa: F401\n    return 'myplug.platform.P'\n",
        "myplug/patch_foo.py": IMPORTS + patched_forward(step) + '\n\nsetattr(FooMTP, "forward", patched_forward)\n',
    }


PLUGIN_MODEL = '''
from vllm.model_executor.models.foo_mtp import FooMTP


class PlugFooMTP(FooMTP):
    def forward(self, input_ids, hidden_states, spec_step_idx: int = 0):
        return self.model(input_ids, hidden_states, {step})
'''


def registration_string(step: str) -> dict[str, str]:
    return {
        "myplug/__init__.py": "def register():\n    return 'myplug.platform.P'\n\n\ndef register_model():\n    from myplug.models import register_model\n\n    register_model()\n",
        "myplug/models/__init__.py": 'from vllm.model_executor.models import ModelRegistry\n\n\ndef register_model():\n'
                                     '    ModelRegistry.register_model("FooMTPModel", "myplug.models.foo:PlugFooMTP")\n',
        "myplug/models/foo.py": PLUGIN_MODEL.replace("{step}", step),
    }


def registration_class(step: str) -> dict[str, str]:
    return {
        "myplug/__init__.py": "def register():\n    return 'myplug.platform.P'\n",
        "myplug/models/__init__.py": "from vllm.model_executor.models import ModelRegistry\n\n"
                                     "from myplug.models.foo import PlugFooMTP\n\n"
                                     'ModelRegistry.register_model("FooMTPModel", PlugFooMTP)\n',
        "myplug/models/foo.py": PLUGIN_MODEL.replace("{step}", step),
    }


PATCH_FORMS = {
    "module-level": (module_level_patch, "myplug/patch_foo.py"),
    "patch-function": (patch_function_patch, "myplug/patches.py"),
    "setattr": (setattr_patch, "myplug/patch_foo.py"),
}
REGISTRATION_FORMS = {"string": registration_string, "class": registration_class}


# --------------------------------------------------------------------------- helpers


@dataclass
class Fixture:
    vllm: Path
    plugin: Path
    files: dict[str, str] = field(default_factory=dict)


def make(tmp_path: Path, plugin_files: dict[str, str], vllm_step: str = THREADS) -> Fixture:
    vroot = write_tree(tmp_path / "vllm-src", vllm_files(vllm_step))
    proot = tmp_path / "myplug-src"
    for rel, text in {"pyproject.toml": PLUGIN_PYPROJECT, **plugin_files}.items():
        p = proot / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return Fixture(vroot, proot, plugin_files)


def combined(fx: Fixture) -> CombinedTree:
    return CombinedTree([Root("vllm", DirectoryTree(fx.vllm), False), Root("vllm-myplug", locate_plugin(fx.plugin), True)])


def scan(tree, config: Config | None = None) -> Scan:
    return run_scan(tree, config or Config(), all_rules(), FactsCache(None), 1)


def findings(s: Scan, rule: str | None = None) -> list:
    return [f for f in s.result.findings if rule is None or f.rule == rule]


# --------------------------------------------------------------------------- the tree


def test_plugin_tree_is_found_from_entry_points_and_keeps_roots(tmp_path):
    fx = make(tmp_path, module_level_patch(THREADS))
    (fx.plugin / "tests").mkdir()
    (fx.plugin / "tests" / "__init__.py").write_text("")
    plugin = locate_plugin(fx.plugin)
    assert plugin.packages == ("myplug",)  # from the entry point, not tests/
    assert plugin.label == "vllm-myplug"
    tree = combined(fx)
    assert "myplug/patch_foo.py" in tree.python_files() and "vllm/spec_decode/proposer.py" in tree.python_files()
    assert tree.root_of("myplug/patch_foo.py").name == "vllm-myplug"
    assert tree.root_of("vllm/loader.py").name == "vllm"
    assert tree.read("myplug/patch_foo.py").startswith(b"from vllm")


def test_plugin_package_from_setup_py_entry_points(tmp_path):
    root = tmp_path / "p"
    (root / "pkg_a").mkdir(parents=True)
    (root / "pkg_a" / "__init__.py").write_text("")
    (root / "other").mkdir()
    (root / "other" / "__init__.py").write_text("")
    (root / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='x', entry_points={'vllm.general_plugins': ['a = pkg_a.reg:register']})\n"
    )
    assert locate_plugin(root).packages == ("pkg_a",)


def test_plugin_without_entry_points_uses_its_packages(tmp_path):
    root = tmp_path / "p"
    for d in ("plug_pkg", "tests", "docs"):
        (root / d).mkdir(parents=True)
        (root / d / "__init__.py").write_text("")
    assert locate_plugin(root).packages == ("plug_pkg",)


def test_two_roots_with_the_same_package_are_refused(tmp_path):
    from auditor.common.errors import UsageError

    fx = make(tmp_path, module_level_patch(THREADS))
    plugin = locate_plugin(fx.plugin)
    with pytest.raises(UsageError, match="myplug/ is in two scanned roots"):
        CombinedTree([Root("vllm", DirectoryTree(fx.vllm), False), Root("a", plugin, True), Root("b", plugin, True)])


# --------------------------------------------------------------------------- monkeypatches


@pytest.mark.parametrize("form", sorted(PATCH_FORMS))
def test_patch_valid_threading_function_leaves_no_finding(tmp_path, form):
    build, _ = PATCH_FORMS[form]
    fx = make(tmp_path, build(THREADS))
    assert findings(scan(combined(fx))) == []


@pytest.mark.parametrize("form", sorted(PATCH_FORMS))
def test_patch_invalid_dropping_function_is_reported_in_the_plugin(tmp_path, form):
    build, patch_file = PATCH_FORMS[form]
    fx = make(tmp_path, build(DROPS))
    assert findings(scan(DirectoryTree(fx.vllm))) == []  # vLLM alone is clean
    s = scan(combined(fx))
    (f,) = findings(s, "MTP001")
    assert (f.path, f.function, f.root) == (patch_file, "patched_forward", "vllm-myplug")
    assert "with the constant 0" in f.message
    # The draft loop's reachability now goes through the patched function.
    (cls,) = [r for r in s.result.reachability if r.model_class.name == "FooMTP"]
    (loop,) = cls.loops
    assert not loop.steps_reach_layers
    assert any(h.path == patch_file for h in loop.trace)
    assert any(f"patched in at {patch_file}:" in h.note for h in loop.trace)


@pytest.mark.parametrize("form", sorted(PATCH_FORMS))
def test_patch_replaces_a_dropping_vllm_method(tmp_path, form):
    """vLLM's own FooMTP.forward drops the step; the plugin's patch threads it: the
    finding in vLLM's file disappears, and the loop reaches layer i again."""
    build, patch_file = PATCH_FORMS[form]
    fx = make(tmp_path, build(THREADS), vllm_step=DROPS)
    alone = scan(DirectoryTree(fx.vllm))
    assert [(f.rule, f.path, f.function) for f in findings(alone)] == [
        ("MTP001", "vllm/model_executor/models/foo_mtp.py", "FooMTP.forward")
    ]
    s = scan(combined(fx))
    assert findings(s) == []
    (cls,) = [r for r in s.result.reachability if r.model_class.name == "FooMTP"]
    assert cls.loops[0].steps_reach_layers
    assert any(h.path == patch_file for h in cls.loops[0].trace)


def test_patch_function_patches_are_listed_with_their_site(tmp_path):
    fx = make(tmp_path, patch_function_patch(DROPS))
    tree = combined(fx)
    index = Index(tree, Config())
    index.load_seeds()
    plugins = Analysis(index, Config()).get(PluginProvider)
    (p,) = plugins.patches()
    assert p.original == ("vllm/model_executor/models/foo_mtp.py", "FooMTP.forward")
    assert p.replacement == ("myplug/patches.py", "patched_forward")
    assert (p.site.path, p.site.function) == ("myplug/patches.py", "apply_patches")


def test_patch_of_a_local_object_or_own_class_is_not_a_vllm_patch(tmp_path):
    files = {
        "myplug/__init__.py": "",
        "myplug/patch_foo.py": IMPORTS + patched_forward(DROPS) + '''

class Mine(FooMTP):
    pass


Mine.forward = patched_forward


def configure(model):
    model.forward = patched_forward
    setattr(model, "forward", patched_forward)
''',
    }
    fx = make(tmp_path, files)
    index = Index(combined(fx), Config())
    index.load_seeds()
    assert Analysis(index, Config()).get(PluginProvider).patches() == []


# --------------------------------------------------------------------------- registrations


@pytest.mark.parametrize("form", sorted(REGISTRATION_FORMS))
def test_registration_valid(tmp_path, form):
    fx = make(tmp_path, REGISTRATION_FORMS[form](THREADS))
    s = scan(combined(fx))
    assert findings(s) == []
    (entry,) = [r for r in s.result.reachability if "FooMTPModel" in r.architectures]
    assert (entry.model_class.path, entry.model_class.name) == ("myplug/models/foo.py", "PlugFooMTP")
    assert entry.loops and entry.loops[0].steps_reach_layers


@pytest.mark.parametrize("form", sorted(REGISTRATION_FORMS))
def test_registration_invalid_replaces_the_registry_entry(tmp_path, form):
    fx = make(tmp_path, REGISTRATION_FORMS[form](DROPS))
    s = scan(combined(fx))
    (f,) = findings(s, "MTP001")
    assert (f.path, f.function, f.root) == ("myplug/models/foo.py", "PlugFooMTP.forward", "vllm-myplug")
    # The plugin's class took the architecture over: vLLM's class is no longer a draft model.
    assert [r.model_class.name for r in s.result.reachability] == ["PlugFooMTP"]
    (entry,) = s.result.reachability
    assert entry.architectures == ["FooMTPModel"]
    assert not entry.loops[0].steps_reach_layers
    assert entry.loops[0].trace[-1].path == "vllm/model_executor/models/foo_mtp.py"  # the selection stays vLLM's


def test_registration_replaces_a_dropping_vllm_model(tmp_path):
    fx = make(tmp_path, registration_string(THREADS), vllm_step=DROPS)
    assert [f.path for f in findings(scan(DirectoryTree(fx.vllm)))] == ["vllm/model_executor/models/foo_mtp.py"]
    # vLLM's FooMTP is no longer a draft model, its file is no seed of a loop: no finding.
    assert findings(scan(combined(fx))) == []


def test_registration_config_names_the_call(tmp_path):
    files = registration_string(DROPS)
    files["myplug/models/__init__.py"] = files["myplug/models/__init__.py"].replace("register_model(", "add_model(")
    fx = make(tmp_path, files)
    # Not a registration call by default: vLLM's FooMTP stays the draft model.
    assert [r.model_class.name for r in scan(combined(fx)).result.reachability] == ["FooMTP"]
    cfg = Config(plugin_register_calls=["add_model"])
    assert [r.model_class.name for r in scan(combined(fx), cfg).result.reachability] == ["PlugFooMTP"]


# --------------------------------------------------------------------------- the plugin's own loops


def test_plugin_proposer_subclass_loop_is_found(tmp_path):
    files = {
        "myplug/__init__.py": "",
        "myplug/spec_decode/__init__.py": "",
        "myplug/spec_decode/proposer.py": '''
from vllm.spec_decode.proposer import Proposer


class NpuProposer(Proposer):
    def propose(self, input_ids, hidden_states):
        out = []
        for step in range(self.num_speculative_tokens):
            hidden_states = self.model(input_ids, hidden_states)
            out.append(hidden_states)
        return out
''',
    }
    fx = make(tmp_path, files)
    s = scan(combined(fx))
    (f,) = findings(s, "MTP002")
    assert (f.path, f.function, f.root) == ("myplug/spec_decode/proposer.py", "NpuProposer.propose", "vllm-myplug")
    loops = {lp.loop.split(" ")[-1]: lp.steps_reach_layers for r in s.result.reachability for lp in r.loops}
    assert loops == {"Proposer.propose": True, "NpuProposer.propose": False}


# --------------------------------------------------------------------------- command line and output


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_json_and_sarif_name_the_roots(tmp_path):
    fx = make(tmp_path, module_level_patch(DROPS))
    out = cli("scan", str(fx.vllm), "--plugin", str(fx.plugin), "-f", "json", "--no-cache")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert [(r["name"], r["plugin"], r["packages"]) for r in doc["roots"]] == [("vllm", False, ["vllm"]), ("vllm-myplug", True, ["myplug"])]
    assert [(f["root"], f["path"]) for f in doc["findings"]] == [("vllm-myplug", "myplug/patch_foo.py")]
    from auditor.output.json_format import load_schema
    import jsonschema

    jsonschema.validate(doc, load_schema())
    sarif = json.loads(cli("scan", str(fx.vllm), "--plugin", str(fx.plugin), "-f", "sarif", "--no-cache").stdout)
    run = sarif["runs"][0]
    assert run["originalUriBaseIds"]["vllm-myplug"]["uri"] == fx.plugin.resolve().as_uri() + "/"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == fx.vllm.resolve().as_uri() + "/"
    (res,) = run["results"]
    loc = res["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "myplug/patch_foo.py", "uriBaseId": "vllm-myplug"}
    flow = res["codeFlows"][0]["threadFlows"][0]["locations"]
    bases = {(x["location"]["physicalLocation"]["artifactLocation"]["uri"].split("/")[0],
              x["location"]["physicalLocation"]["artifactLocation"]["uriBaseId"]) for x in flow}
    assert ("vllm", "%SRCROOT%") in bases and ("myplug", "vllm-myplug") in bases


def test_cli_without_plugins_has_no_roots(tmp_path):
    fx = make(tmp_path, {}, vllm_step=DROPS)
    doc = json.loads(cli("scan", str(fx.vllm), "-f", "json", "--no-cache").stdout)
    assert "roots" not in doc and all("root" not in f for f in doc["findings"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--plugin", "does-not-exist"], "plugin path does not exist"),
        (["--plugin", "vllm-src/vllm/loader.py"], "expected a plugin directory, got a file"),
        (["--plugin", "vllm-src"], "holds a vllm/ package: pass vLLM as PATH"),
        (["--plugin-release", "vllm-ascend"], "--plugin-release wants NAME==VERSION"),
        (["--plugin-release", "==1.0"], "--plugin-release wants NAME==VERSION"),
    ],
)
def test_cli_bad_plugin_arguments(tmp_path, args, message):
    fx = make(tmp_path, {})
    out = cli("scan", str(fx.vllm), *args, "--no-cache", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("mtp-audit: error: ") and message in out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_cli_plugin_holding_no_package(tmp_path):
    fx = make(tmp_path, {})
    empty = tmp_path / "empty"
    empty.mkdir()
    out = cli("scan", str(fx.vllm), "--plugin", str(empty), "--no-cache")
    assert out.returncode == 2 and "no Python package found under plugin path" in out.stderr


# --------------------------------------------------------------------------- --plugin-release


def test_plugin_release_is_fetched_verified_and_cached(monkeypatch, tmp_path):
    """The plugin's sdist comes from the configured index like a vLLM release: sha256
    checked, unpacked once into the cache, reused without the network."""
    import hashlib

    from test_fetch import FakeIndex

    from auditor.source.fetch import fetch_release

    files = {f"vllm_myplug-1.0/{k}": v.encode() for k, v in {**module_level_patch(DROPS), "pyproject.toml": PLUGIN_PYPROJECT,
                                                           "PKG-INFO": "Metadata-Version: 2.1\nName: vllm_myplug\nVersion: 1.0\n"}.items()}
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    idx = FakeIndex()
    try:
        idx.routes["/files/vllm_myplug-1.0.tar.gz"] = (200, "application/octet-stream", data)
        page = {"meta": {"api-version": "1.1"}, "name": "vllm-myplug", "files": [
            {"filename": "vllm_myplug-1.0.tar.gz", "url": f"{idx.url}/files/vllm_myplug-1.0.tar.gz",
             "hashes": {"sha256": hashlib.sha256(data).hexdigest()}},
            {"filename": "vllm_myplug-0.9-py3-none-any.whl", "url": f"{idx.url}/files/x.whl", "hashes": {"sha256": "0" * 64}},
        ]}
        idx.routes["/simple/vllm-myplug/"] = (200, "application/vnd.pypi.simple.v1+json", json.dumps(page).encode())
        monkeypatch.setenv("PIP_INDEX_URL", idx.index)
        cache = tmp_path / "cache"
        root = fetch_release("1.0", cache, progress=False, project="vllm_myplug")
        assert root == cache / "releases" / "vllm-myplug-1.0"
        assert (root / "myplug" / "patch_foo.py").is_file()
        assert json.loads((root / ".mtp-audit-release.json").read_text())["project"] == "vllm-myplug"
        fx = make(tmp_path, {})
        env_cache = ["--cache-dir", str(cache)]
        out = cli("scan", str(fx.vllm), "--plugin-release", "vllm-myplug==1.0", "-f", "json", *env_cache)
        assert out.returncode == 1, out.stderr
        doc = json.loads(out.stdout)
        assert doc["roots"][1]["name"] == "vllm-myplug" and doc["findings"][0]["root"] == "vllm-myplug"
        requests = len(idx.requests)
        assert cli("scan", str(fx.vllm), "--plugin-release", "vllm-myplug==1.0", "-f", "json", *env_cache).returncode == 1
        assert len(idx.requests) == requests  # cached: no network
        # A version the index does not have, and a wheel-only version: one clear line each.
        out = cli("scan", str(fx.vllm), "--plugin-release", "vllm-myplug==2.0", *env_cache)
        assert out.returncode == 2 and "vllm-myplug 2.0 is not on" in out.stderr and "nearest versions: 1.0" in out.stderr
        out = cli("scan", str(fx.vllm), "--plugin-release", "vllm-myplug==0.9", *env_cache)
        assert out.returncode == 2 and "has no source distribution" in out.stderr
        # A corrupted download is refused and nothing is kept.
        idx.routes["/files/vllm_myplug-1.0.tar.gz"] = (200, "application/octet-stream", data[:-10] + b"0123456789")
        out = cli("scan", str(fx.vllm), "--plugin-release", "vllm-myplug==1.0", "--cache-dir", str(tmp_path / "c2"))
        assert out.returncode == 2 and "sha256 mismatch" in out.stderr
        assert not (tmp_path / "c2" / "releases" / "vllm-myplug-1.0").exists()
    finally:
        idx.close()


def test_patch_module_importing_vllm_in_parentheses_is_read(tmp_path):
    """The text prefilter must see ``from vllm.x import (\\n A,\\n B as C,\\n)``."""
    files = module_level_patch(DROPS)
    files["myplug/patch_foo.py"] = files["myplug/patch_foo.py"].replace(
        "from vllm.model_executor.models.foo_mtp import FooMTP\n",
        "from vllm.model_executor.models.foo_mtp import (  # the patched class\n    FooPredictor,\n    FooMTP as Target,\n)\n",
    ).replace("FooMTP.forward = patched_forward", "Target.forward = patched_forward")
    fx = make(tmp_path, files)
    (f,) = findings(scan(combined(fx)), "MTP001")
    assert (f.path, f.function) == ("myplug/patch_foo.py", "patched_forward")


# --------------------------------------------------------------------------- lint inside a plugin repository


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


def test_lint_plugin_repository_against_a_pinned_vllm(tmp_path):
    """A plugin's CI: the change under review makes the patched forward drop the step."""
    fx = make(tmp_path, module_level_patch(THREADS))
    _git(fx.plugin, "init", "-q")
    _git(fx.plugin, "add", "-A")
    _git(fx.plugin, "commit", "-qm", "base")
    (fx.plugin / "myplug" / "patch_foo.py").write_text(module_level_patch(DROPS)["myplug/patch_foo.py"])
    out = cli("lint", str(fx.plugin), "--base", "HEAD", "--vllm", str(fx.vllm), "-f", "json", "--no-cache")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert [(f["rule"], f["path"], f["root"]) for f in doc["findings"]] == [("MTP001", "myplug/patch_foo.py", "vllm-myplug")]
    # Committed: linting the commit against its parent finds the same; against itself, nothing.
    _git(fx.plugin, "commit", "-qam", "drop")
    out = cli("lint", str(fx.plugin), "--base", "HEAD~1", "--head", "HEAD", "--vllm", str(fx.vllm), "-f", "json", "--no-cache")
    assert out.returncode == 1 and len(json.loads(out.stdout)["findings"]) == 1
    out = cli("lint", str(fx.plugin), "--base", "HEAD", "--vllm", str(fx.vllm), "-f", "json", "--no-cache")
    assert out.returncode == 0 and json.loads(out.stdout)["findings"] == []


def test_lint_plugin_wants_one_vllm(tmp_path):
    fx = make(tmp_path, module_level_patch(THREADS))
    _git(fx.plugin, "init", "-q")
    out = cli("lint", str(fx.plugin), "--base", "HEAD", "--vllm", str(fx.vllm), "--vllm-release", "0.30.0")
    assert out.returncode == 2 and "give one of --vllm PATH and --vllm-release" in out.stderr


def test_explain_a_plugin_finding_shows_the_plugin_code(tmp_path):
    fx = make(tmp_path, module_level_patch(DROPS))
    doc = json.loads(cli("scan", str(fx.vllm), "--plugin", str(fx.plugin), "-f", "json", "--no-cache").stdout)
    fingerprint = doc["findings"][0]["fingerprint"]
    out = cli("explain", fingerprint, str(fx.vllm), "--plugin", str(fx.plugin), "--no-cache")
    assert out.returncode == 0, out.stderr
    assert "myplug/patch_foo.py" in out.stdout and "return self.model(input_ids, hidden_states, 0)" in out.stdout


def test_patch_function_the_plugin_never_runs_is_no_patch(tmp_path):
    files = patch_function_patch(DROPS)
    files["myplug/__init__.py"] = "def register():\n    return 'myplug.platform.P'\n"
    fx = make(tmp_path, files)
    assert findings(scan(combined(fx))) == []  # apply_patches is never referred to
    # ... but an entry point that names it runs it.
    (fx.plugin / "pyproject.toml").write_text(PLUGIN_PYPROJECT + 'patches = "myplug.patches:apply_patches"\n')
    assert [f.path for f in findings(scan(combined(fx)), "MTP001")] == ["myplug/patches.py"]


def test_registered_override_that_calls_super_keeps_the_vllm_method(tmp_path):
    """The plugin's class overrides forward but calls super().forward: vLLM's dropping
    forward still runs, so its finding stays."""
    files = registration_string(THREADS)
    files["myplug/models/foo.py"] = PLUGIN_MODEL.replace(
        "return self.model(input_ids, hidden_states, {step})",
        "return super().forward(input_ids, hidden_states, spec_step_idx)",
    )
    fx = make(tmp_path, files, vllm_step=DROPS)
    s = scan(combined(fx))
    assert [(f.rule, f.path, f.function) for f in findings(s)] == [
        ("MTP001", "vllm/model_executor/models/foo_mtp.py", "FooMTP.forward")
    ]


def test_wrapper_patch_that_saves_the_original_keeps_its_findings(tmp_path):
    """``_orig = FooMTP.forward`` then ``FooMTP.forward = wrapper``: the wrapper may run
    the original, so vLLM's dropping forward stays examined (its finding remains)."""
    files = module_level_patch(THREADS)
    files["myplug/patch_foo.py"] = IMPORTS + '''
_orig_forward = FooMTP.forward


def patched_forward(self, input_ids, hidden_states, spec_step_idx: int = 0):
    return _orig_forward(self, input_ids, hidden_states, spec_step_idx)


FooMTP.forward = patched_forward
'''
    fx = make(tmp_path, files, vllm_step=DROPS)
    s = scan(combined(fx))
    assert [(f.rule, f.path, f.function) for f in findings(s)] == [
        ("MTP001", "vllm/model_executor/models/foo_mtp.py", "FooMTP.forward")
    ]
    index = Index(combined(fx), Config())
    index.load_seeds()
    (p,) = Analysis(index, Config()).get(PluginProvider).patches()
    assert p.keeps_original and p.replacement == ("myplug/patch_foo.py", "patched_forward")
