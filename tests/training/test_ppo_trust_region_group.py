"""benchmarks/ppo_trust_region.py's group baseline, target_kl stop and probe of unseen episodes, on a tiny real model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from cuda_agent.training.engines.models import load_causal_lm

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import ppo_trust_region  # noqa: E402

TINY = {"model_type": "llama", "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64}


def two_turn_rows(rewards: list[float], groups: list[int] | None, seed: int) -> list[dict]:
    """Episodes as the PPO stage saves them: prompt (mask 0), a first turn, an observation, a second turn."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i, r in enumerate(rewards):
        first, second = 6 + i % 3, 4 + i % 2
        mask = [0] * 4 + [1] * first + [0] * 3 + [1] * second
        row = {"token_ids": torch.randint(0, 32, (len(mask),), generator=g).tolist(), "loss_mask": mask,
               "logprobs": [0.0] * len(mask), "reward": r, "success": r > 0, "meta": {}}
        if groups is not None:
            row["meta"]["group"] = groups[i]
        rows.append(row)
    return rows


@pytest.fixture
def actor(tmp_path: Path) -> Path:
    d = tmp_path / "actor"
    load_causal_lm(TINY, seed=0).save_pretrained(str(d))
    return d


def write(tmp_path: Path, name: str, rows: list[dict]) -> Path:
    f = tmp_path / name
    torch.save(rows, f)
    return f


def replay(actor: Path, episodes: Path, tmp_path: Path, *extra: str) -> dict:
    return ppo_trust_region.main(["--actor", str(actor), "--episodes", str(episodes), "--n", "8", "--keep-rewards",
                                  "--epochs", "2", "--minibatches", "2", "--out", str(tmp_path / "t.json"), *extra])


GROUPS = [0, 0, 0, 0, 1, 1, 1, 1]


def test_groups_of_one_reward_give_no_advantage_and_leave_the_policy_as_it_was(actor, tmp_path):
    f = write(tmp_path, "uniform.pt", two_turn_rows([2.0] * 4 + [-1.0] * 4, GROUPS, seed=0))
    group = replay(actor, f, tmp_path, "--lr", "3e-2", "--baseline", "group")["rates"][0]
    assert [e["advantage"] for e in group["advantages"]["per_episode"]] == [0.0] * 8
    assert [e["group"] for e in group["advantages"]["per_episode"]] == GROUPS  # whole groups, in file order
    assert group["minibatches_stepped"] == 4
    assert group["after"]["k1_mean"] == 0.0 and group["after"]["log_ratio_min"] == 0.0
    # the same batch against the whitened returns: one group is above the batch mean, the other below, so it moves
    whitened = replay(actor, f, tmp_path, "--lr", "3e-2", "--baseline", "whitened")["rates"][0]
    assert whitened["after"]["k1_mean"] > 1e-3


def test_group_advantages_are_leave_one_out_then_whitened(actor, tmp_path):
    rewards = [2.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0]  # group 0 mixed, group 1 uniform
    f = write(tmp_path, "mixed.pt", two_turn_rows(rewards, GROUPS, seed=1))
    rows = replay(actor, f, tmp_path, "--lr", "1e-6", "--baseline", "group")["rates"][0]["advantages"]["per_episode"]
    by_reward = {(e["group"], e["reward"]): e["advantage"] for e in rows}
    assert len(by_reward) == 3  # episodes of one group with one reward share one advantage
    uniform = by_reward[(1, 1.0)]  # raw advantage 0: whitening only shifts and scales it
    raw = {(0, 2.0): 2.0 - (-1.0), (0, -1.0): -1.0 - (2.0 - 1.0 - 1.0) / 3}  # reward minus the others' mean
    scale = [(by_reward[k] - uniform) / v for k, v in raw.items()]
    assert scale[0] > 0 and scale[0] == pytest.approx(scale[1], rel=1e-4)


def test_a_batch_without_groups_or_with_a_cut_group_is_refused(actor, tmp_path):
    plain = write(tmp_path, "plain.pt", two_turn_rows([1.0] * 8, None, seed=2))
    with pytest.raises(SystemExit, match="meta\\['group'\\]"):
        replay(actor, plain, tmp_path, "--lr", "1e-6", "--baseline", "group")
    grouped = write(tmp_path, "grouped.pt", two_turn_rows([1.0] * 8, GROUPS, seed=2))
    with pytest.raises(SystemExit, match="whole number"):
        ppo_trust_region.load_batch(grouped, 6, 0.5, seed=1, keep_rewards=True, grouped=True)


def test_target_kl_stops_the_update_at_the_first_minibatch_past_it(actor, tmp_path):
    f = write(tmp_path, "mixed.pt", two_turn_rows([2.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 2.0], GROUPS, seed=3))
    stopped = replay(actor, f, tmp_path, "--lr", "3e-2", "--baseline", "group", "--target-kl", "1e-4")["rates"][0]
    assert stopped["kl_stopped"] and stopped["minibatches_stepped"] == 1 and stopped["minibatches_planned"] == 4
    assert [m["stepped"] for m in stopped["minibatches"]] == [True, False]  # the second was measured, not stepped
    assert stopped["minibatches"][1]["approx_kl"] > 1e-4
    full = replay(actor, f, tmp_path, "--lr", "3e-2", "--baseline", "group")["rates"][0]
    assert not full["kl_stopped"] and full["minibatches_stepped"] == 4
    assert full["after"]["k1_mean"] > stopped["after"]["k1_mean"]


def test_first_turn_is_the_first_run_of_policy_tokens():
    mask = torch.tensor([[0, 1, 1, 0, 1, 1, 0], [1, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]], dtype=torch.float32)
    assert ppo_trust_region.first_turn(mask).int().tolist() == [[0, 1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0],
                                                                 [0] * 7]


def test_probe_reports_unseen_episodes_before_and_after_the_update(actor, tmp_path):
    f = write(tmp_path, "mixed.pt", two_turn_rows([2.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 2.0], GROUPS, seed=4))
    probe_rows = [two_turn_rows([-1.0, -1.0, 2.0], [0, 0, 0], seed=5), two_turn_rows([1.0, -1.0], [0, 0], seed=6)]
    probes = [write(tmp_path, f"probe{k}.pt", rows) for k, rows in enumerate(probe_rows)]
    r = replay(actor, f, tmp_path, "--lr", "3e-2", "--baseline", "group",
               "--probe", ",".join(map(str, probes)))["rates"][0]["probe"]
    assert (r["episodes"], r["failing"], r["passing"]) == (5, 3, 2)
    # the tokens the actor gave p < 0.1 before the update, counted here from the model itself
    model = load_causal_lm(actor)
    first_low = all_low = 0
    for row in probe_rows[0] + probe_rows[1]:
        if row["reward"] != -1.0:
            continue
        ids = torch.tensor([row["token_ids"]])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        p = lp.gather(1, ids[0, 1:, None])[:, 0].exp()
        m = torch.tensor(row["loss_mask"][1:], dtype=torch.bool)
        first = torch.zeros_like(m)
        first[3:3 + row["loss_mask"].index(0, 4) - 4] = True  # a 4-token prompt, then turn 1 (action layout: -1)
        first_low += int((first & (p < 0.1)).sum())
        all_low += int((m & (p < 0.1)).sum())
    for name, low in (("first_turn", first_low), ("all_tokens", all_low)):
        tail, passing = r[name]["failing_tail"], r[name]["passing"]
        assert tail["tokens"] == low > 0 and tail["episodes"] == 3
        assert tail["mean_dlogp"] != 0.0 and 0.0 <= tail["share_fell"] <= 1.0
        assert passing["episodes"] == 2 and passing["mean_dsum_logp"] != 0.0
    assert r["all_tokens"]["failing_tail"]["tokens"] > r["first_turn"]["failing_tail"]["tokens"]
    assert set(r["confident"]) >= {"tokens", "mean_dlogp", "fell_over_2_nats", "fell_over_5_nats"}
