

def test_a_head_method_reading_a_literal_container_at_a_constant_key_names_that_head(tmp_path):
    files = gate_tree()
    model = _MODEL.format(build=_LIST, key="spec_step_idx % 3", more=(
        '        self.heads = nn.ModuleDict({"main": nn.Linear(4, 4), "alt": nn.Linear(4, 4)})\n'))
    model += '''
    def compute_logits(self, x, spec_step_idx: int = 0):
        if spec_step_idx > 8:
            raise ValueError("step")
        return self.heads["alt"](x)
'''
    files["vllm/models/deep_mtp.py"] = model
    files["vllm/spec_decode/speculators.py"] = files["vllm/spec_decode/speculators.py"].replace(
        "            x = self.model(x, spec_step_idx=step)\n",
        "            x = self.model(x, spec_step_idx=step)\n            x = self.model.compute_logits(x, spec_step_idx=step)\n")
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 5),))
    plan = planned_scan(root, [setting])[1][0]
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"
    # The forward selects by the step (its literal list: 3 layers); the head is always entry 1,
    # so the steps' heads do not follow their layers: the step is lost in the head.
    assert plan.num_mtp_layers == 3
    assert [(s.forward_layer, s.head_layer) for s in plan.steps] == [(0, 1), (1, 1), (2, 1)], plan.steps
    assert all(s.verdict.startswith("lost") for s in plan.steps), plan.steps
