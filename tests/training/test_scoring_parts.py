"""Scoring a batch in update-sized parts (no forward over padding) gives the full-batch result."""

from __future__ import annotations

import torch

from cuda_agent.training.buffers import Episode, collate
from cuda_agent.training.engines.models import CriticModel, load_causal_lm
from cuda_agent.training.ppo_update import Learner

TINY = {"model_type": "llama", "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64, "tie_word_embeddings": False}


class Bare:
    """The engine calls the Learner makes, on a bare module (scoring needs no optimizer)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module.eval()

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return self.module(*args, **kwargs)


def test_scoring_in_parts_matches_the_padded_full_batch():
    g = torch.Generator().manual_seed(0)
    lengths = [17, 9, 30, 4, 22]
    eps = [Episode(torch.randint(0, 32, (n,), generator=g).tolist(), [0] * 3 + [1] * (n - 3), [0.0] * n, reward=1.0, turns=1)
           for n in lengths]
    batch = collate(eps)
    learner = Learner(Bare(load_causal_lm(TINY, seed=0)), Bare(CriticModel(load_causal_lm(TINY, seed=1))))
    full = learner.score(batch, 1)
    for parts in (2, 5):
        split = learner.score(batch, parts)
        assert split.keys() == full.keys() == {"old_logp", "values"}
        for key in full:
            assert split[key].shape == full[key].shape
            for b, n in enumerate(lengths):  # real positions agree; padding is never read
                torch.testing.assert_close(split[key][b, : n - 1], full[key][b, : n - 1], rtol=1e-5, atol=1e-5)


def test_unpadded_batch_is_scored_without_a_mask():
    eps = [Episode(list(range(10)), [1] * 10, [0.0] * 10, reward=0.0, turns=1)] * 2
    assert Learner._mask_arg(collate(eps)) is None
    ragged = collate([Episode(list(range(10)), [1] * 10, [0.0] * 10, reward=0.0, turns=1),
                      Episode(list(range(4)), [1] * 4, [0.0] * 4, reward=0.0, turns=1)])
    assert Learner._mask_arg(ragged) is ragged.attention_mask


def test_chunk_recomputation_gives_the_same_values_and_gradients():
    from cuda_agent.training.algorithms import logprobs_and_entropy

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 11, 7, generator=g, dtype=torch.float64)
    targets = torch.randint(0, 7, (2, 11), generator=g)
    grads = []
    for recompute in (False, True):
        x = logits.clone().requires_grad_(True)
        lp, ent = logprobs_and_entropy(x, targets, chunk=4, recompute=recompute)
        assert ent is not None
        (lp.sum() * 0.7 + ent.sum() * 0.3).backward()
        grads.append((lp.detach(), ent.detach(), x.grad))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    lsm = torch.log_softmax(logits, -1)  # and both equal the direct formula
    torch.testing.assert_close(grads[0][0], lsm.gather(-1, targets[..., None])[..., 0].float())
