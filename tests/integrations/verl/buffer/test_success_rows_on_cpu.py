"""The trainer's success buffer: whole trajectories per task instance (every step row of a 15-step success, in step
order), limited per instance in trajectories, feeding SDPO demos and Entropulse SFT; SDPO's loss fields."""

import random

import torch

from verl_cua.algos.success_buffer import SuccessBuffer, instance_of, task_instance
from verl_cua.integrations.verl import sdpo as sdpo_hook
from verl_cua.integrations.verl.buffer import entropulse as entropulse_phase
from verl_cua.integrations.verl.buffer import success_rows
from verl_cua.integrations.verl.config.schema import CuaConfig, SdpoConfig
from verl_cua.integrations.verl.estimator_plan import plan_for
from verl_cua.integrations.verl.sdpo import MASK, logit
from verl_cua.integrations.verl.sdpo.fields import sdpo_loss_fields
from verl_cua.integrations.verl.sdpo.teacher_pass import TeacherResult


class _Batch:
    def __init__(self, keys):
        self.keys, self.partition_id = keys, "train"


def _episode(uid, session, steps, success=True, seed=7):
    """Step rows of one episode (keys `{uid}_{session}_{i}`), shuffled, with their extra fields and tensors."""
    actions = [f"pyautogui.click({i}, {i})" for i in range(steps)]
    extra = {"cua_success": success, "cua_task": "click-test", "cua_instance": f"click-test@seed={seed}"}
    rows = [(f"{uid}_{session}_{i}", {**extra, "cua_actions": actions, "step_index": i}) for i in range(steps)]
    random.Random(steps).shuffle(rows)
    return rows


def _fake_tq(monkeypatch, keys):
    """TransferQueue's kv_batch_get over per-key tensors that record their step (response token = step index)."""

    def get(wanted, partition_id, fields):
        step = [int(k.rsplit("_", 1)[1]) for k in wanted]
        return {f: [torch.full((3,), s) if f != "multi_modal_inputs" else {} for s in step] for f in fields}

    monkeypatch.setattr(success_rows.tq, "kv_batch_get", get)


def test_a_15_step_success_is_kept_whole_and_the_limit_counts_trajectories(monkeypatch):
    rows = _episode("u", 0, 15) + _episode("u", 1, 4, success=False)
    for s in range(2, 11):  # nine more successes of the same instance, different action texts
        rows += [(k.replace("u_", "v_"), {**e, "cua_actions": [f"{a} #{s}" for a in e["cua_actions"]]})
                 for k, e in _episode("u", s, 2)]  # fmt: skip
    keys, extra = [k for k, _ in rows], [e for _, e in rows]
    _fake_tq(monkeypatch, keys)
    buffer = SuccessBuffer(per_task=8)
    first = _episode("u", 0, 15)
    new = success_rows.buffer_successes(buffer, _Batch([k for k, _ in first]), [e for _, e in first], with_rows=True)
    assert new == 1 and len(buffer) == 1
    (trajectory,) = buffer.get("click-test@seed=7")
    assert len(trajectory["rows"]) == 15 and len(trajectory["actions"]) == 15
    assert [int(r["responses"][0]) for r in trajectory["rows"]] == list(range(15))  # step order
    assert all(torch.equal(r["loss_mask"], r["response_mask"]) for r in trajectory["rows"])
    # nine more 2-step successes of the instance: eight trajectories stay, each whole; the failure is not kept
    assert success_rows.buffer_successes(buffer, _Batch(keys), extra, with_rows=True) == 9
    kept = buffer.get("click-test@seed=7")
    assert len(kept) == 8 and all(len(t["rows"]) == len(t["actions"]) == 2 for t in kept)
    # Entropulse SFT takes every row of the trajectories it samples; SDPO demos are their action lists
    sampled = entropulse_phase._rows(buffer.sample_all(3, random.Random(0)))
    assert len(sampled) == 6
    assert success_rows.demos(buffer) == {"click-test@seed=7": [t["actions"] for t in kept]}


def test_instances_do_not_mix():
    assert task_instance({"task": "click-test", "seed": 7}) == "click-test@seed=7"
    assert task_instance("click-test") == "click-test"
    a = task_instance({"task": "calc-sum-column", "config": [{"type": "open", "path": "a.xlsx"}]})
    b = task_instance({"task": "calc-sum-column", "config": [{"type": "open", "path": "b.xlsx"}]})
    assert a != b and a.startswith("calc-sum-column@")
    assert instance_of({"cua_task": "t", "cua_instance": "t@seed=1"}) == "t@seed=1"
    assert instance_of({"cua_task": "t"}) == "t"  # rows written before instances existed


def _plan(estimator):
    return plan_for(estimator, CuaConfig())


def _teacher(reprompt, topk=0):
    result = TeacherResult(reprompt=reprompt, success=[False] * len(reprompt))
    if topk:
        result.topk_ids = {0: torch.ones(2, topk)}
        result.teacher_topk = {0: torch.full((2, topk), -1.0)}
    return result


def test_sdpo_loss_fields_normalise_over_reprompted_tokens():
    mask = torch.nested.as_nested_tensor([torch.tensor([1, 0, 1]), torch.tensor([1, 1])], layout=torch.jagged)
    sdpo = SdpoConfig(loss="logit", topk=4, normalize="reprompted")
    rows = sdpo_loss_fields(_plan("sdpo"), _teacher([True, False], topk=4), mask, [False, False], sdpo)
    assert rows[0][MASK].tolist() == [1, 0, 1] and rows[1][MASK].tolist() == [0, 0]
    assert set(rows[0]) == set(sdpo_hook.HOOK.row_fields)  # what the step hook declares it writes
    assert rows[1]["loss_mask"].tolist() == [0, 0]  # verl counts only reprompted tokens in the mean
    assert rows[0][logit.IDS].shape == (3, 4) and rows[0][logit.TEACHER][:2].eq(-1).all()
    assert rows[1][logit.IDS].abs().sum() == 0
    # normalize=all keeps verl's loss_mask; sdpo_grpo trains every row (GRPO on successes) and is token-level
    assert (
        "loss_mask"
        not in sdpo_loss_fields(_plan("sdpo"), _teacher([True, False]), mask, [False] * 2, SdpoConfig(normalize="all"))[
            0
        ]
    )
    # cua.sdpo.loss=logit, but the sdpo_grpo plan says token (`plan.sdpo_loss`): no top-k fields
    grpo_mix = plan_for("sdpo_grpo", CuaConfig.from_mapping({"sdpo": {"loss": "logit"}}))
    assert grpo_mix.sdpo_loss == "token" and sdpo.loss == "logit"
    rows = sdpo_loss_fields(grpo_mix, _teacher([True, False]), mask, [False, True], sdpo)
    assert rows[1][MASK].tolist() == [0, 0] and rows[0][MASK].tolist() == [1, 0, 1]  # infra rows train nothing
    assert logit.IDS not in rows[0] and "loss_mask" not in rows[0]


def test_a_long_demo_keeps_every_step_within_its_token_budget():
    from verl_cua.integrations.verl.sdpo.context import feedback_block, fit_demo

    def encode(text):
        return list(text)  # one token per character

    def decode(ids):
        return "".join(ids)

    actions = ["a" * 10, "b" * 300, "c" * 40, "d" * 5]
    assert fit_demo(actions, 1000, encode, decode) == actions  # fits: unchanged
    fitted = fit_demo(actions, 100, encode, decode)
    assert len(fitted) == 4 and fitted[0] == "a" * 10 and fitted[3] == "d" * 5  # short steps whole
    # the largest cap c with 10 + min(300, c) + min(40, c) + 5 <= 100 is 45: only the 300-token step is cut, marked
    assert fitted[1] == "b" * 45 + "..." and fitted[2] == "c" * 40
    block = feedback_block(["x" * 3000] * 20, 0.0, "", None)
    assert block.head.count("Step ") == 20 and "Step 20: " + "x" * 3000 in block.head  # no character cut


class _Store:
    """An in-memory stand-in for TransferQueue's key-value calls (get, put of one-row TensorDicts, clear)."""

    def __init__(self, rows):
        self.rows = {k: dict(v) for k, v in rows.items()}

    def get(self, keys, partition_id=None, select_fields=None):
        fields = select_fields or list(self.rows[keys[0]])
        return {f: [self.rows[k][f] for k in keys] for f in fields}

    def clear(self, keys, partition_id=None):
        for k in keys:
            del self.rows[k]


def test_replay_puts_a_whole_step_row_trajectory_into_an_all_fail_group(monkeypatch):
    from verl.trainer.ppo.v1.trainer_base import KVBatchMeta

    from verl_cua.integrations.verl.buffer import replay as replay_injection

    def row(uid, session, step, score=0.0):
        extra = {"cua_score": score, "cua_instance": "t@seed=1", "step_index": step, "cua_success": score >= 1}
        return {"uid": uid, "session_id": session, "extra_fields": extra, "prompts": torch.ones(4),
                "responses": torch.ones(2), "response_mask": torch.ones(2)}  # fmt: skip

    # group g: episodes 0 (2 steps) and 1 (3 steps), both failed; group h: one success, one failure
    rows = {f"g_{s}_{i}": row("g", s, i) for s, n in ((0, 2), (1, 3)) for i in range(n)}
    rows |= {"h_0_0": row("h", 0, 0, 1.0), "h_1_0": row("h", 1, 0)}
    store = _Store(rows)
    monkeypatch.setattr(replay_injection.tq, "kv_batch_get", store.get)
    monkeypatch.setattr(replay_injection.tq, "kv_clear", store.clear)
    monkeypatch.setattr(
        replay_injection, "put_rows", lambda keys, pid, fields, tags: store.rows.update(zip(keys, fields, strict=True))
    )
    buffer = SuccessBuffer()
    steps = [
        {
            "prompts": torch.ones(5),
            "responses": torch.full((3,), float(i)),
            "response_mask": torch.ones(3),
            "extra_fields": {"cua_score": 1.0, "step_index": i, "cua_actions": ["a"] * 4},
        }
        for i in range(4)
    ]
    buffer.add("t@seed=1", "k", {"actions": ["a"] * 4, "rows": steps})
    keys = list(rows)
    batch = KVBatchMeta(keys=keys, tags=[{"seq_len": 6} for _ in keys], partition_id="train")
    out, metrics = replay_injection.inject_replays(batch, buffer, {}, random.Random(0))
    assert metrics == {"replay/injected": 1.0, "replay/rows_added": 1.0}  # a 3-step episode became 4 steps
    assert [k for k in out.keys if k.startswith("g_1_")] == ["g_1_0", "g_1_1", "g_1_2", "g_1_3"]
    assert [k for k in out.keys if k.startswith("g_0_")] == ["g_0_0", "g_0_1"]  # the other failure stays
    for i in range(4):
        new = store.rows[f"g_1_{i}"]
        assert (new["uid"], new["session_id"]) == ("g", 1)  # under the replaced episode's group and session
        assert torch.equal(new["responses"], torch.full((3,), float(i)))  # the success's own rows, in step order
        assert new["extra_fields"]["cua_replayed"] and new["extra_fields"]["step_index"] == i
    assert [t["seq_len"] for t, k in zip(out.tags, out.keys, strict=True) if k.startswith("g_1_")] == [8] * 4
    assert "h_0_0" in out.keys and "h_1_0" in out.keys  # a group with a success is left alone
