"""The backend's compiler: it refuses every stage. Under TRITON_INTERPRET=1 nothing compiles."""

from __future__ import annotations

from types import ModuleType
from typing import NoReturn

from triton.backends.compiler import BaseBackend, GPUTarget, Language

_WHY = ("mtp-audit's stub Triton 'cpu' backend compiles nothing: run with TRITON_INTERPRET=1 "
        "so that Triton interprets kernels instead")


class StubCPUBackend(BaseBackend):
    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cpu"

    def hash(self) -> str:
        return "mtp-audit-triton-cpu-stub"

    def parse_options(self, options: dict[str, object]) -> NoReturn:
        raise RuntimeError(_WHY)

    def add_stages(self, stages: dict[str, object], options: object, language: Language) -> NoReturn:
        raise RuntimeError(_WHY)

    def load_dialects(self, context: object) -> None:
        return None

    def get_module_map(self) -> dict[str, ModuleType]:
        return {}
