"""The held-out scorer's own comparison (:mod:`heldout_score`), for a case that pins no runner
(``"runner": null``): which runner vLLM uses is part of the answer, so the tool's answers for
both runners are judged together."""

from __future__ import annotations

from heldout_score import compare


def _answer(outcome: str = "plan", runner_used: bool | None = None, layers: tuple[int, ...] = (0, 1)) -> dict:
    return {"outcome": outcome, "drafter": "D", "alternatives": [], "draft_model_class": "M",
            "forward_layers": list(layers), "forward_runs": [[x] for x in layers], "head_layers": list(layers),
            "raises_at_step": None, "verdicts": [], "runner_used": runner_used}


_EXPECTED = {"outcome": "plan", "runner": "v1", "drafter": "D", "draft_model_class": "M", "forward_layers": [0, 1],
             "head_layers": [0, 1], "raises_at_step": None}


def test_a_case_without_a_runner_needs_the_runner_vllm_uses():
    # The tool says which runner vLLM uses, and its plan for it agrees: every field agrees.
    got = {"by_runner": {"v1": _answer(runner_used=True), "v2": _answer(runner_used=False, layers=(0, 0))}}
    assert all(compare(_EXPECTED, got).values())
    # The same plans, the runner not derived: the runner field disagrees, the rest is judged on v1's plan.
    got = {"by_runner": {"v1": _answer(), "v2": _answer(layers=(0, 0))}}
    fields = compare(_EXPECTED, got)
    assert fields["runner"] is False and fields["forward_layers"] is True
    # The tool names the other runner: wrong, and the plan judged is still the expected runner's.
    got = {"by_runner": {"v1": _answer(runner_used=False), "v2": _answer(runner_used=True)}}
    assert compare(_EXPECTED, got)["runner"] is False


def test_a_case_rejected_before_any_runner_needs_every_runner_rejected():
    expected = {"outcome": "rejected", "runner": None}
    both = {"by_runner": {"v1": _answer("rejected"), "v2": _answer("rejected")}}
    one = {"by_runner": {"v1": _answer("rejected"), "v2": _answer()}}
    assert compare(expected, both) == {"outcome": True}
    assert compare(expected, one) == {"outcome": False}
