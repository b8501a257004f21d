"""The toy environments played by any token sampler (how a vLLM engine plays them) and by a model module."""

from __future__ import annotations

import torch

from cuda_agent.training.toy_env import KEY0, OBS, Q0, SEP, TWO, ToyEnvironment, answer_token


def _oracle(seen: list[list[int]]):
    """A sampler answering each question/key right (log-prob -0.5), and any first move with token 7 (log-prob -1)."""

    def sample(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen.extend(ids.tolist())
        rows = ids.tolist()
        tokens, logps = [], []
        for row in rows:
            if len(row) == 3 and row[1] == TWO:  # two-turn, first move: [BOS, TWO, SEP]
                tokens.append(7), logps.append(-1.0)
            elif row[-3] == OBS:  # two-turn, after the observation [OBS, KEY_k, SEP]
                tokens.append(answer_token(row[-2] - KEY0)), logps.append(-0.5)
            else:  # single: [BOS, Q_a, SEP]
                tokens.append(answer_token(row[1] - Q0)), logps.append(-0.5)
        return torch.tensor(tokens), torch.tensor(logps)

    return sample


def test_single_turn_records_the_samplers_tokens_and_logprobs() -> None:
    seen: list[list[int]] = []
    eps = ToyEnvironment("toy_single").rollout_with(_oracle(seen), 6, torch.Generator().manual_seed(0))
    assert all(e.success and e.reward == 1.0 for e in eps)
    assert [e.logprobs for e in eps] == [[0.0, 0.0, 0.0, -0.5]] * 6
    assert [e.token_ids[:3] for e in eps] == seen and all(e.loss_mask == [0, 0, 0, 1] for e in eps)


def test_two_turn_gives_the_sampler_the_observation_and_masks_it() -> None:
    seen: list[list[int]] = []
    eps = ToyEnvironment("toy_two_turn").rollout_with(_oracle(seen), 5, torch.Generator().manual_seed(1))
    assert all(e.success for e in eps)  # the right second move needs the key shown in the observation
    assert len(seen) == 10 and all(len(row) == 3 for row in seen[:5]) and all(len(row) == 7 for row in seen[5:])
    for e in eps:
        assert e.token_ids[3] == 7 and e.token_ids[4] == OBS and e.token_ids[6] == SEP
        assert e.loss_mask == [0, 0, 0, 1, 0, 0, 0, 1]
        assert e.logprobs == [0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, -0.5]


def test_a_model_and_its_sampler_give_the_same_episodes(toy_config: dict) -> None:
    from cuda_agent.training.engines.models import load_causal_lm
    from cuda_agent.training.toy_env import sample_next

    model = load_causal_lm(toy_config, seed=3).eval()
    env = ToyEnvironment("toy_two_turn")
    direct = env.rollout(model, 8, torch.Generator().manual_seed(5))
    gen = torch.Generator().manual_seed(5)
    via = env.rollout_with(lambda ids: sample_next(model, ids, gen, 1.0), 8, gen)
    assert [e.token_ids for e in direct] == [e.token_ids for e in via]
    assert [e.logprobs for e in direct] == [e.logprobs for e in via]
