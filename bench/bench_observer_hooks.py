"""The observer's in-graph cost per MTP layer call, measured in isolation (CPU, eager): the
pre-hooks runtime_check/ingraph.py installs, on a stand-in predictor with 3 layers (nn.Identity:
the hook cost alone), against the same forward without hooks.

    .venv-runtime/bin/python bench/bench_observer_hooks.py [--calls 20000]

Prints microseconds per layer call without counters, with the driver's counters
(positions=0), and with the observer's (positions table, gate on); the difference is what a
drafting step pays per MTP layer (plus a head hook where the layer has one).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from runtime_check import ingraph  # noqa: E402


class Predictor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Identity() for _ in range(3))


class Draft(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = Predictor()
        self.w = nn.Parameter(torch.zeros(1))


def per_call_us(draft: Draft, calls: int) -> float:
    x = torch.zeros(1, 128)
    layers = draft.model.layers
    for _ in range(200):
        layers[0](x)
    t0 = time.perf_counter()
    for i in range(calls):
        layers[i % 3](x)
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    plain = Draft()
    driver = Draft()
    ingraph.install_counters(driver)
    observer = Draft()
    inner, *_ = ingraph.install_counters(observer, positions=64)
    ingraph.begin_draft_call(inner)
    rows = []
    for name, d in (("no counters", plain), ("driver counters", driver), ("observer counters", observer)):
        best = min(per_call_us(d, a.calls) for _ in range(5))
        rows.append((name, best))
    base = rows[0][1]
    print(f"torch {torch.__version__}, {a.calls} layer calls, best of 5, 1 thread")
    for name, us in rows:
        print(f"  {name:18} {us:7.2f} us per layer call  (+{us - base:.2f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
