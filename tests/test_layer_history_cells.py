"""``history --layers`` cells: when a plan's steps "reach layer i" (model/layer_history.py)."""

from __future__ import annotations

from auditor.model.layer_history import PlanCell


def _cell(n: int | None, forward: tuple, verdict: str) -> PlanCell:
    return PlanCell("A", "v2", "D", "M", n, forward, (None,) * len(forward), (verdict,) * len(forward))


def test_step_i_on_layer_i_reaches() -> None:
    assert _cell(3, (0, 1, 2), "threaded").forward_reaches(3)
    assert _cell(2, (0, 1, 0), "threaded").forward_reaches(2)  # K above the layer count: i mod n


def test_layer_zero_every_step_does_not_reach() -> None:
    assert not _cell(3, (0, 0, 0), "constant").forward_reaches(3)


def test_a_model_that_builds_fewer_layers_than_asked_does_not_reach() -> None:
    # One layer built whatever the 3-layer checkpoint says: 0, 0, 0 is i mod 1, yet step 1
    # and 2 never run layers 1 and 2.
    assert not _cell(1, (0, 0, 0), "constant").forward_reaches(3)
    assert _cell(1, (0,), "constant").forward_reaches(1)  # one step, one layer: layer 0 is its own


def test_an_unknown_verdict_never_reaches() -> None:
    assert not _cell(3, (0, 1, 2), "unknown").forward_reaches(3)
