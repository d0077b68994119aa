"""Runtime checker: run a real vLLM draft loop and record which MTP layer runs per step."""
