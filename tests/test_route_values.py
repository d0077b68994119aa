"""The route as one value (issue 18, deliver 1): a route carries its factory branch and
condition, its drafter, and per draft model class a leg holding the drafter's loops into
the class, the forward and head selections with the per-step reading, the layer-count
fields and the compiled-mode freezes; a plan is read from the leg of its drafter and class.
Trees written here (tests/trees.py)."""

from __future__ import annotations

import dataclasses

import pytest
from scan_helpers import scan_tree, write_tree
from trees import gate_tree

from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.analyses.loops import StepKind


@pytest.fixture(scope="module")
def dispatch(tmp_path_factory) -> DispatchProvider:
    scan = scan_tree(write_tree(tmp_path_factory.mktemp("routes") / "t", gate_tree()))
    assert scan.analysis is not None
    return scan.analysis.get(DispatchProvider)


def _route(dispatch: DispatchProvider, arch: str, drafter: str):
    found = [rt for rt in dispatch.dispatch_routes() if rt.architecture == arch and rt.drafter[1] == drafter]
    assert len(found) == 1, [(rt.architecture, rt.drafter[1]) for rt in dispatch.dispatch_routes()]
    return found[0]


def test_a_route_carries_its_condition_loops_layer_fields_and_per_step_reading(dispatch):
    threading = _route(dispatch, "DeepMTPModel", "MultiModuleSpeculator")
    eagle = _route(dispatch, "DeepMTPModel", "EagleStyleSpeculator")
    assert threading.describe() == "speculative_config.use_multi_module_mtp() is True"
    assert eagle.describe() == "speculative_config.use_multi_module_mtp() is False"
    assert [m[1] for m in threading.models] == ["DeepMTP"]
    leg = threading.leg(threading.models[0])
    assert leg is not None and leg.path is not None and leg.reading is not None
    assert [p.loop.func[1] for p in leg.loops] == ["MultiModuleSpeculator.propose"]
    assert leg.reading.forward is StepKind.VARYING and leg.reading.loss is None
    assert [s.container for s in leg.forward] == ["self.layers"]
    assert leg.layer_count_fields == ("num_nextn_predict_layers",)
    eagle_leg = eagle.leg(eagle.models[0])
    assert eagle_leg is not None and eagle_leg.reading is not None
    assert eagle_leg.reading.forward is StepKind.ABSENT
    assert [p.loop.func[1] for p in eagle_leg.loops] == ["EagleStyleSpeculator.propose"]
    qwen = _route(dispatch, "QwenMTP", "EagleStyleSpeculator").legs[0]
    assert qwen.layer_count_fields == ("mtp_num_hidden_layers",)


def test_a_route_is_an_immutable_value(dispatch):
    route = _route(dispatch, "DeepMTPModel", "MultiModuleSpeculator")
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.legs = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.legs[0].loops = ()  # type: ignore[misc]
    assert dispatch.dispatch_routes() == dispatch.dispatch_routes()  # built once, memoised
    assert route.legs[0] is dispatch.route_values.leg(route.drafter, route.models[0])


def test_a_plan_reads_the_leg_of_its_drafter_and_class(dispatch):
    plan = dispatch.plan(Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),)))
    assert plan.proposer is not None and plan.model_class is not None
    leg = dispatch.route_values.leg(plan.proposer, plan.model_class)
    assert plan.proposer[1] == "MultiModuleSpeculator"
    assert plan.loop == leg.loop and plan.layer_field in leg.layer_count_fields
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "threaded"), (1, "threaded"), (2, "threaded")]
    one = dispatch.plan(Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 1),)))
    assert one.proposer is not None and one.proposer[1] == "EagleStyleSpeculator"
    assert one.loop == dispatch.route_values.leg(one.proposer, plan.model_class).loop
    assert {s.forward_layer for s in one.steps} == {0}
