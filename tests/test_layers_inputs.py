"""`--speculative-config` and `--hf-config` inputs (issue 18), read as vLLM reads them."""

from __future__ import annotations

import json

import pytest

from auditor.analyses.dispatch.inputs import parse_speculative_config
from auditor.services.layers import read_hf_config as read_target_config
from auditor.common.errors import UsageError


def test_the_json_vllm_serve_takes():
    got = parse_speculative_config('{"method": "mtp", "num_speculative_tokens": 3, '
                                   '"draft_sample_method": "probabilistic", "use_local_argmax_reduction": true}')
    assert (got.method, got.k) == ("mtp", 3)
    assert got.options == (("draft_sample_method", "probabilistic"), ("use_local_argmax_reduction", True))


def test_a_json_file_by_path_or_at(tmp_path):
    f = tmp_path / "spec.json"
    f.write_text(json.dumps({"method": "mtp", "num_speculative_tokens": 2, "parallel_drafting": True}))
    for text in (str(f), f"@{f}"):
        got = parse_speculative_config(text)
        assert (got.method, got.k, got.options) == ("mtp", 2, (("parallel_drafting", True),))


@pytest.mark.parametrize("text,fragment", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"num_speculative_tokens": 0}', "must be a positive integer"),
    ('{"num_speculative_tokens": true}', "must be a positive integer"),
    ('{"method": 3}', "must be a string"),
    ("@/nonexistent/spec.json", "cannot read"),
])
def test_bad_input_is_one_clear_error(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        parse_speculative_config(text)


def test_hf_config_takes_the_file_or_a_model_directory(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "deepseek_v3"}')
    assert json.loads(read_target_config(tmp_path))["model_type"] == "deepseek_v3"
    assert json.loads(read_target_config(tmp_path / "config.json"))["model_type"] == "deepseek_v3"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="directory without config.json"):
        read_target_config(empty)
    with pytest.raises(UsageError, match="cannot read --hf-config"):
        read_target_config(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="is not a JSON file"):
        read_target_config(tmp_path / "bad.json")
