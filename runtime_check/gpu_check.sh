#!/usr/bin/env bash
# GPU check for mtp-audit's runtime checker (issue 12): does step i run layer i under CUDA
# graphs? The same table as `mtp-audit runtime matrix --engine-mode eager,compiled` on CPU,
# with the `vllm` package on CUDA (the V2 runner uses real Triton kernels: no stub backend,
# no TRITON_INTERPRET), in three passes that share one time budget (default 480 s of engine
# runs, so that the whole script fits in 10 minutes on a machine where vLLM is installed):
#
#   1. eager and compiled with FULL CUDA graphs      (V1 and V2 runners, shipped and forced)
#   2. compiled with PIECEWISE CUDA graphs           (V1 and V2, shipped and forced)
#   3. compiled, default graphs, breakable graphs on (VLLM_USE_BREAKABLE_CUDAGRAPH=1: V1 wraps
#      drafter.model in a graph wrapper keyed by the batch only; V2's multi-module
#      speculator keys its breakable graphs on spec_step_idx % layers)
#   4. the deployment observer (issue 21) under a real `vllm serve` with CUDA graphs
#      (compiled, vLLM's default graph mode; GLM-4 MoE, V1 and V2 runners): the plugin is
#      installed into the runtime environment (no deps, from a copy of this checkout) if its
#      entry point is missing; per server the log is read by `mtp-audit runtime observed
#      --plan` against the static plan of the same vllm package. Its own budget,
#      MTP_AUDIT_GPU_OBSERVER_BUDGET_S (default 200 s; 0 skips the pass). Output:
#      $OUT/observer/<arch>-<runner>-compiled/{observe.jsonl,serve.log,summary.json,plan.json}
#      and $OUT/observer/observed.txt.
#
# Layers are observed in-graph: per-layer counter buffers and a step log updated inside each
# MTP layer's forward, installed when vLLM loads the drafter, so they are compiled and
# captured with the layer and replayed with it (see docs/runtime.md). The
# multi-module speculator is what the V2 runner builds for DeepSeek-V3 and GLM-4 MoE with
# 3 MTP layers and K=3. Rows the budget left out say "not run: the ... budget was spent".
#
#   bash runtime_check/gpu_check.sh          # uses $MTP_AUDIT_RUNTIME_PYTHON or a venv it makes
#
# Environment: MTP_AUDIT_VLLM_SPEC (pip version spec for vllm, e.g. "==0.32.0"),
# MTP_AUDIT_GPU_ARCHS (space-separated architectures; default "deepseek_v3 glm4_moe":
# DeepSeek-V3's MTP wrapper is compiled, GLM-4 MoE's is not), MTP_AUDIT_GPU_BUDGET_S (seconds
# of engine runs, default 480), MTP_AUDIT_GPU_RUN_TIMEOUT (per run, default 90),
# MTP_AUDIT_GPU_OUT (output directory, default gpu-check-results/), MTP_AUDIT_CLI_PYTHON (a
# Python with mtp-audit's dependencies; default .venv/bin/python, else python3).
# Output: $OUT/{eager-full,piecewise,breakable}.json and $OUT/matrix.md (one table); exit 1
# if a run that was started failed (matrix or observer).
#
# NOT RUN: no GPU was available to this work, and CI machines have none. Nothing in the
# test suite depends on it.
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
for a in ${MTP_AUDIT_GPU_ARCHS:-deepseek_v3 glm4_moe}; do ARCH_ARGS+=(--arch "$a"); done
RUN_TIMEOUT="${MTP_AUDIT_GPU_RUN_TIMEOUT:-90}"
END=$((SECONDS + ${MTP_AUDIT_GPU_BUDGET_S:-480}))

# budget SHARE: start no run after min(SHARE, time left - one run's timeout) seconds.
budget() {
    local left=$((END - SECONDS - RUN_TIMEOUT))
    [ "$left" -lt 0 ] && left=0
    [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
matrix() {  # OUTFILE SHARE ENGINE_MODES [RUNNER]
    "$PY" -m runtime_check.cli matrix --k 3 --mtp-layers 3 --runner "${4:-both}" "${ARCH_ARGS[@]}" \
        --engine-mode "$3" --budget "$(budget "$2")" --timeout "$RUN_TIMEOUT" --format json -o "$1"
}
MTP_AUDIT_CUDAGRAPH_MODE=FULL matrix "$OUT/eager-full.json" 260 eager,compiled
MTP_AUDIT_CUDAGRAPH_MODE=PIECEWISE matrix "$OUT/piecewise.json" 140 compiled
VLLM_USE_BREAKABLE_CUDAGRAPH=1 matrix "$OUT/breakable.json" 80 compiled
# 4. The observer under `vllm serve` with CUDA graphs.
OBS_FAIL=0
OBS_END=$((SECONDS + ${MTP_AUDIT_GPU_OBSERVER_BUDGET_S:-200}))
if [ "${MTP_AUDIT_GPU_OBSERVER_BUDGET_S:-200}" -gt 0 ]; then
    RPY="$MTP_AUDIT_RUNTIME_PYTHON"
    if ! (cd / && "$RPY" -c "import sys; from importlib.metadata import entry_points as e; sys.exit(0 if any(p.name == 'mtp_audit_observer' for p in e(group='vllm.general_plugins')) else 1)"); then
        BUILD="$(mktemp -d)"
        cp -r pyproject.toml README.md auditor rules runtime_check "$BUILD/"
        if "$RPY" -c "import setuptools" 2>/dev/null; then ISO=--no-build-isolation; else ISO=; fi
        "$RPY" -m pip install -q --disable-pip-version-check --no-deps $ISO "$BUILD"
        rm -rf "$BUILD"
    fi
    VLLM_PKG="$("$RPY" -c "import importlib.util; print(importlib.util.find_spec('vllm').submodule_search_locations[0])")"
    mkdir -p "$OUT/observer"
    : > "$OUT/observer/observed.txt"
    for RUNNER in v1 v2; do
        if [ $((OBS_END - SECONDS)) -lt 120 ]; then
            echo "observer glm4_moe $RUNNER compiled: not run: the observer budget was spent" | tee -a "$OUT/observer/observed.txt"
            continue
        fi
        D="$OUT/observer/glm4_moe-$RUNNER-compiled"
        timeout 300 "$PY" -m runtime_check.observer.serve_check --arch glm4_moe --runner "$RUNNER" \
            --engine-mode compiled --gpu --runtime-python "$RPY" --out "$OUT/observer" || OBS_FAIL=1
        if [ -f "$D/observe.jsonl" ]; then
            "$PY" -m auditor.cli layers "$VLLM_PKG" --hf-config "$D/model/config.json" --k 3 --runner "$RUNNER" \
                --platform cuda -f json -o "$D/plan.json" || OBS_FAIL=1
            "$PY" -m runtime_check.cli observed "$D/observe.jsonl" --plan "$D/plan.json" \
                | tee -a "$OUT/observer/observed.txt" || OBS_FAIL=1
        fi
    done
fi

"$PY" - "$OUT" "$OBS_FAIL" <<'PYEOF'
import json, sys
from pathlib import Path
from runtime_check.cli import render_matrix
out = Path(sys.argv[1])
docs = [json.loads((out / f"{name}.json").read_text()) for name in ("eager-full", "piecewise", "breakable")]
for name, doc in zip(("", "", " breakable"), docs):
    for row in doc["rows"]:
        if name and row.get("compilation"):
            row["compilation"]["cudagraph_mode"] += name
merged = dict(docs[0], rows=[r for d in docs for r in d["rows"]])
md = render_matrix(merged, "markdown")
(out / "matrix.md").write_text(md)
print(md)
failed = [r for r in merged["rows"] if r["error"] and not r["error"].startswith("not run:")]
sys.exit(1 if failed or sys.argv[2] != "0" else 0)
PYEOF
