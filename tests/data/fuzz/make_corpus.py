"""Regenerate ``corpus.jsonl``: the Python modules the fuzz test scans (tests/test_fuzz.py).

    python tests/data/fuzz/make_corpus.py

hypothesmith's ``from_grammar()`` with the fuzz test's own settings (FUZZ: no shrinking, no
database), one seeded part per process as the test ran them live before the corpus existed
(seeds 0 .. FUZZ_PROCESSES-1, ``FUZZ_EXAMPLES / FUZZ_PROCESSES`` examples each). Drawing a
module costs ~100x what scanning it costs, so the test scans this stored corpus and generates
only ``LIVE_EXAMPLES`` new modules per run (another seed). Every module is written exactly as
generated, one JSON string per line, in generation order; the header line records the
hypothesis and hypothesmith versions that made them."""

from __future__ import annotations

import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository, for tests.test_fuzz

from hypothesis import given, seed, settings  # noqa: E402

from tests import test_fuzz  # noqa: E402


def draw_part(part: int, examples: int) -> list[str]:
    out: list[str] = []

    @seed(part)
    @settings(max_examples=examples, **{**test_fuzz.FUZZ, "derandomize": False})
    @given(test_fuzz.PYTHON)
    def collect(source: str) -> None:
        out.append(source)

    collect()
    return out


def main() -> None:
    n = test_fuzz.FUZZ_PROCESSES
    per_part = -(-test_fuzz.FUZZ_EXAMPLES // n)
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as pool:
        parts = list(pool.map(draw_part, range(n), [per_part] * n))
    header = {"hypothesis": version("hypothesis"), "hypothesmith": version("hypothesmith"),
              "seeds": list(range(n)), "examples_per_seed": per_part}
    lines = [json.dumps(header)] + [json.dumps(src) for part in parts for src in part]
    (HERE / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines) - 1} modules written to {HERE / 'corpus.jsonl'}")


if __name__ == "__main__":
    main()
