"""Toy environments at the token level, graded instantly: the learning tests' ground truth.

No tokenizer: token ids *are* the alphabet (vocabulary :data:`TOY_VOCAB_SIZE`).
Rewards follow the milestone scale's ends: +1 correct, -1 wrong.

- ``toy_single`` (single-turn): prompt ``[BOS, Q_a, SEP]``, the policy emits one
  token; correct iff it is ``A_perm(a)`` (a fixed permutation of ``K`` answers).
- ``toy_two_turn``: prompt ``[BOS, TWO, SEP]``; turn 1: the policy emits any
  token; the environment answers with the observation ``[OBS, KEY_k, SEP]``
  (``k`` random); turn 2: correct iff the policy emits ``A_perm(k)``. The
  right second action depends only on the observation, so learning it
  proves that observation tokens reach the model as context while the
  policy mask and GAE skip them.

A random policy succeeds with probability about ``1 / TOY_VOCAB_SIZE``.
Sampling uses an explicit ``torch.Generator``, so a (seed, step) pair fixes
every rollout. The policy is a causal LM module (:meth:`ToyEnvironment.rollout`)
or any :data:`TokenSampler` (:meth:`ToyEnvironment.rollout_with`), e.g. a vLLM
engine serving the actor; any model whose vocabulary holds these ids can play.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from cuda_agent.training.buffers import Episode

PAD, BOS, SEP, OBS, TWO = 0, 1, 2, 3, 4
K = 8
Q0 = 5  # question tokens Q0..Q7 = 5..12
KEY0 = Q0 + K  # key tokens 13..20
A0 = KEY0 + K  # answer tokens 21..28
TOY_VOCAB_SIZE = 32
TOY_ENVS: tuple[str, ...] = ("toy_single", "toy_two_turn")


def answer_token(i: int) -> int:
    """The correct answer token for question/key ``i`` (a fixed permutation)."""
    return A0 + (3 * i + 1) % K


def toy_model_config(hidden: int = 64, layers: int = 2) -> dict:
    """Config dict of the tiny Llama the toy tests train (random init, fp32)."""
    return {
        "model_type": "llama",
        "vocab_size": TOY_VOCAB_SIZE,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
        "tie_word_embeddings": False,
        "bos_token_id": BOS,
        "eos_token_id": SEP,
        "pad_token_id": PAD,
    }


@torch.no_grad()
def sample_next(model: nn.Module, ids: torch.Tensor, gen: torch.Generator, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row after ``ids`` ``[B, L]`` (no padding); returns (tokens [B], log-probs [B])."""
    logits = model(input_ids=ids).logits[:, -1].float()
    logp_all = torch.log_softmax(logits / temperature if temperature > 0 else logits, dim=-1)
    if temperature <= 0:
        tok = logp_all.argmax(-1)
    else:
        tok = torch.multinomial(logp_all.exp().cpu(), 1, generator=gen).squeeze(-1).to(ids.device)
    return tok, logp_all.gather(-1, tok.unsqueeze(-1)).squeeze(-1)


#: A policy for the toy environments: token ids ``[B, L]`` (no padding) -> (next tokens ``[B]``, their log-probs ``[B]``).
TokenSampler = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class ToyEnvironment:
    """Batched rollouts of a toy environment with a causal LM as policy."""

    name: str = "toy_single"

    def __post_init__(self) -> None:
        if self.name not in TOY_ENVS:
            raise ValueError(f"unknown toy environment {self.name!r}; valid: {', '.join(TOY_ENVS)}")

    @property
    def turns(self) -> int:
        """Policy turns per episode."""
        return 2 if self.name == "toy_two_turn" else 1

    @torch.no_grad()
    def rollout(
        self, model: nn.Module, n: int, gen: torch.Generator, *, temperature: float = 1.0, device: torch.device | str = "cpu"
    ) -> list[Episode]:
        """``n`` episodes sampled from ``model``; prompts and keys drawn from ``gen``."""
        was_training = model.training
        model.eval()
        try:
            return self.rollout_with(lambda ids: sample_next(model, ids, gen, temperature), n, gen, device=device)
        finally:
            model.train(was_training)

    def rollout_with(self, sampler: TokenSampler, n: int, gen: torch.Generator, *,
                     device: torch.device | str = "cpu") -> list[Episode]:
        """``n`` episodes played by ``sampler``; prompts and keys drawn from ``gen``."""
        if self.name == "toy_single":
            return self._single(sampler, n, gen, device)
        return self._two_turn(sampler, n, gen, device)

    def _single(self, sampler: TokenSampler, n: int, gen: torch.Generator, device) -> list[Episode]:
        q = torch.randint(0, K, (n,), generator=gen)
        ids = torch.stack([torch.full((n,), BOS), Q0 + q, torch.full((n,), SEP)], dim=1).to(device)
        tok, lp = sampler(ids)
        out = []
        for i in range(n):
            ok = int(tok[i]) == answer_token(int(q[i]))
            out.append(
                Episode(
                    token_ids=ids[i].tolist() + [int(tok[i])],
                    loss_mask=[0, 0, 0, 1],
                    logprobs=[0.0, 0.0, 0.0, float(lp[i])],
                    reward=1.0 if ok else -1.0,
                    success=ok,
                    turns=1,
                )
            )
        return out

    def _two_turn(self, sampler: TokenSampler, n: int, gen: torch.Generator, device) -> list[Episode]:
        key = torch.randint(0, K, (n,), generator=gen)
        ids = torch.tensor([[BOS, TWO, SEP]] * n, device=device)
        t1, lp1 = sampler(ids)
        obs = torch.stack([torch.full((n,), OBS), KEY0 + key, torch.full((n,), SEP)], dim=1).to(device)
        ids2 = torch.cat([ids, t1.unsqueeze(1), obs], dim=1)
        t2, lp2 = sampler(ids2)
        out = []
        for i in range(n):
            ok = int(t2[i]) == answer_token(int(key[i]))
            out.append(
                Episode(
                    token_ids=ids2[i].tolist() + [int(t2[i])],
                    loss_mask=[0, 0, 0, 1, 0, 0, 0, 1],
                    logprobs=[0.0, 0.0, 0.0, float(lp1[i]), 0.0, 0.0, 0.0, float(lp2[i])],
                    reward=1.0 if ok else -1.0,
                    success=ok,
                    turns=2,
                )
            )
        return out
