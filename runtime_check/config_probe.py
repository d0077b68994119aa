"""The engine as judge of a configuration's construction: runs inside the runtime environment
(torch + vLLM), never imported by the CLI.

``python config_probe.py MODEL_DIR SPECS_JSON`` builds vLLM's engine configuration
(``EngineArgs(...).create_engine_config()``: the speculative config's construction and
validation, the draft model's config; no model is loaded, no engine started) for each
speculative config of ``SPECS_JSON`` (a JSON list; a value ``"<model>"`` stands for MODEL_DIR)
and prints one JSON line per config: ``{"spec", "outcome": "built", "method", "k"}`` or
``{"spec", "outcome": "raised", "type", "message", "at"}`` (the exception as vLLM raises it,
and the last frame of vLLM's own code it passed through)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

STUBS = Path(__file__).resolve().parent / "stubs"


def main(model: str, specs: list[dict]) -> None:
    sys.path.append(str(STUBS))  # vLLM's Qwen modules import torchvision (see driver.py)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vllm.engine.arg_utils import EngineArgs

    for given in specs:
        spec = {k: (model if v == "<model>" else v) for k, v in given.items()}
        try:
            cfg = EngineArgs(model=model, speculative_config=spec, max_model_len=256,
                             enforce_eager=True).create_engine_config()
        except Exception as e:  # noqa: BLE001 - what the engine raises is the answer
            frames = traceback.extract_tb(e.__traceback__)
            last = next((f for f in reversed(frames) if "/vllm/" in f.filename), frames[-1])
            at = f"vllm/{last.filename.rsplit('/vllm/', 1)[-1]}:{last.lineno}"
            print(json.dumps({"spec": given, "outcome": "raised", "type": type(e).__name__,
                              "message": str(e), "at": at}), flush=True)
            continue
        sc = cfg.speculative_config
        print(json.dumps({"spec": given, "outcome": "built", "method": sc.method,
                          "k": sc.num_speculative_tokens}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
