"""Continuous batching: rows join and leave the decode batch at every step, and each returns the moment it ends.

The batched engine (:class:`~cuda_agent.training.rollout.batching.BatchingEngine` over
:meth:`HFRolloutEngine.generate_requests`) serves whoever is waiting as one batch and answers them all when its
longest row ends. In agent episodes the rows differ a lot: a ``verify`` or ``finish`` call is a few dozen tokens, a
``write_file`` a thousand. Session 27's PPO rollouts on the H200 spent 34 s of policy time in a passing 4-turn
episode whose own 831 tokens need about 8 s of decode steps: short turns waited for a batch already running, then
for its longest row.

Here one decode loop keeps a live batch. Between two steps it admits the requests that arrived (their prompts are
prefilled together and their KV cache joins the batch's, left-padded to the same length) and, after each step,
returns every row that hit EOS, a stop string or its token limit, and drops it from the batch. The left-padding
columns no live row needs any more are trimmed. A row's tokens and log-probs are sampled by the same code as the
batched engine's (:func:`~cuda_agent.training.rollout.hf_engine.sample_tokens`) over the same left-padded,
attention-masked forward, so the trajectory contract is unchanged: every reported log-prob is that of the sampled
token under the distribution it was sampled from. Rows of one live batch share temperature and top-p (stop strings
and token limits are per row); a request with other settings waits until the batch drains.

Pieces:

- :class:`ContinuousDecoder`: the live batch over an :class:`HFRolloutEngine`'s model (admit, step).
- :mod:`~cuda_agent.training.rollout.continuous_serving`: the loop around it (``serve``), what episode threads call
  (``ContinuousFront``) and the in-process engine (``ContinuousEngine``); the generation child runs the same loop
  (:class:`~cuda_agent.training.rollout.process_engine.ContinuousProcessEngine`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from cuda_agent.protocols import Generation, SamplingParams
from cuda_agent.training.attention import attention_backends
from cuda_agent.training.rollout.hf_engine import HFRolloutEngine, left_padded, sample_tokens

Request = tuple[int, list[int], SamplingParams]  # (request id, prompt ids, sampling settings)


def batch_key(params: SamplingParams) -> tuple[float, float]:
    """What the rows of one live batch must share (temperature, top-p)."""
    return (params.temperature, params.top_p)


@dataclass
class _Row:
    rid: int
    limit: int
    stop: list[str]
    outputs: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)


@dataclass
class DecoderStats:
    """What a decoder did: forwards (decode steps and prefills), row-steps (live rows summed over decode steps),
    rows admitted and ended, and seconds spent in forwards and sampling."""

    steps: int = 0
    prefills: int = 0
    row_steps: int = 0
    admitted: int = 0
    ended: int = 0
    busy_s: float = 0.0
    max_rows: int = 0

    def as_dict(self) -> dict[str, float]:
        """Counters with the mean live rows per decode step."""
        return {"gen_steps": float(self.steps), "gen_prefills": float(self.prefills), "gen_rows": float(self.ended),
                "gen_s": self.busy_s, "gen_rows_per_step": self.row_steps / self.steps if self.steps else 0.0,
                "gen_max_rows": float(self.max_rows)}


class ContinuousDecoder:
    """A live decode batch over ``engine``'s model: :meth:`admit` adds rows, :meth:`step` decodes one token for
    every live row; both return the rows that ended, as ``(request id, Generation)``.

    :param engine: the loaded model, its EOS ids, pad id, tokenizer (stop strings), attention backends and
        ``step_hold`` (held around each forward and the sync that ends it).
    :param max_rows: rows in the batch at most.
    :param seed: seed of the one sampling generator (None: random).
    """

    def __init__(self, engine: HFRolloutEngine, max_rows: int, seed: int | None = None) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        self.engine = engine
        self.max_rows = max_rows
        self.gen = torch.Generator(device=engine.device)
        if seed is None:
            self.gen.seed()
        else:
            self.gen.manual_seed(seed)
        self.rows: list[_Row] = []
        self.params: SamplingParams | None = None
        self.stats = DecoderStats()
        self._cache: Any = None
        self._mask: torch.Tensor | None = None  # [rows, columns] on the device, 1 where a row has a token
        self._positions: torch.Tensor | None = None  # [rows, 1]: position of each row's pending token
        self._token: torch.Tensor | None = None  # [rows]: sampled, not yet fed
        self._keep: list[int] | None = None  # rows to keep, applied inside the next hold

    @property
    def live(self) -> int:
        """Rows in the batch."""
        return len(self.rows)

    def room(self) -> int:
        """Rows that can still join."""
        return self.max_rows - len(self.rows)

    def accepts(self, params: SamplingParams) -> bool:
        """Whether a request with ``params`` can join now (the live rows share temperature and top-p)."""
        return self.room() > 0 and (not self.rows or batch_key(params) == batch_key(self.params))

    def abort(self) -> list[int]:
        """Drop every live row (after an error); their request ids."""
        rids = [r.rid for r in self.rows]
        self.rows, self.params = [], None
        self._cache = self._mask = self._positions = self._token = self._keep = None
        return rids

    # -- device work ------------------------------------------------------------------------------------
    def _held(self) -> Any:
        hold = self.engine.step_hold
        return hold if hold is not None else contextlib.nullcontext()

    def _forward(self, **inputs: Any) -> Any:
        with attention_backends(self.engine.attention):
            return self.engine.model(**inputs, use_cache=True, **getattr(self.engine, "forward_kwargs", {}))

    def _sample(self, logits: torch.Tensor) -> tuple[list[int], list[float], torch.Tensor]:
        token, logp = sample_tokens(logits, self.params, self.gen)
        t_sync = time.perf_counter()
        tokens, logps = token.tolist(), logp.tolist()  # the one device sync of a forward
        self.engine.profile.sync_s += time.perf_counter() - t_sync
        return tokens, logps, token

    def _apply_keep(self) -> None:
        """Drop ended rows from the device state (inside a hold), then the padding columns no row needs."""
        if self._keep is None:
            return
        idx = torch.tensor(self._keep, device=self.engine.device)
        self._cache.batch_select_indices(idx)
        self._mask, self._positions, self._token = self._mask[idx], self._positions[idx], self._token[idx]
        self._keep = None
        first = int(self._mask.any(0).int().argmax())  # first column some row still attends to
        if first > 0:
            self._mask = self._mask[:, first:]
            self._cache = type(self._cache)(ddp_cache_data=[(layer.keys[:, :, first:], layer.values[:, :, first:])
                                                            for layer in self._cache.layers])

    def _merge(self, cache: Any, mask: torch.Tensor, positions: torch.Tensor, token: torch.Tensor) -> None:
        """Join new rows' state to the live batch's: both left-padded to the longer one's columns."""
        if self._cache is None:
            self._cache, self._mask, self._positions, self._token = cache, mask, positions, token
            return
        width = max(self._mask.shape[1], mask.shape[1])

        def pad(t: torch.Tensor, dim: int) -> torch.Tensor:
            missing = width - t.shape[dim]
            if missing == 0:
                return t
            shape = list(t.shape)
            shape[dim] = missing
            return torch.cat([torch.zeros(shape, dtype=t.dtype, device=t.device), t], dim=dim)

        layers = [(torch.cat([pad(a.keys, 2), pad(b.keys, 2)]), torch.cat([pad(a.values, 2), pad(b.values, 2)]))
                  for a, b in zip(self._cache.layers, cache.layers, strict=True)]
        self._cache = type(self._cache)(ddp_cache_data=layers)
        self._mask = torch.cat([pad(self._mask, 1), pad(mask, 1)])
        self._positions = torch.cat([self._positions, positions])
        self._token = torch.cat([self._token, token])

    # -- rows -------------------------------------------------------------------------------------------
    def _record(self, rows: list[_Row], tokens: list[int], logps: list[float]) -> tuple[list[int], list[tuple[int, Generation]]]:
        """Append each row's token; the indices of rows that go on, and the rows that ended."""
        keep: list[int] = []
        ended: list[tuple[int, Generation]] = []
        for j, (row, t, lp) in enumerate(zip(rows, tokens, logps, strict=True)):
            row.outputs.append(t)
            row.logps.append(lp)
            if t in self.engine.eos_ids or self.engine.hit_stop(row.outputs, row.stop):
                ended.append((row.rid, Generation(output_ids=row.outputs, logprobs=row.logps, finish_reason="stop")))
            elif len(row.outputs) >= row.limit:
                ended.append((row.rid, Generation(output_ids=row.outputs, logprobs=row.logps, finish_reason="length")))
            else:
                keep.append(j)
        self.stats.ended += len(ended)
        return keep, ended

    @torch.no_grad()
    def admit(self, requests: Sequence[Request]) -> list[tuple[int, Generation]]:
        """Prefill ``requests`` together, sample their first tokens, and join those that go on to the batch."""
        if not requests:
            return []
        if len(requests) > self.room():
            raise ValueError(f"{len(requests)} requests do not fit: {self.room()} of {self.max_rows} rows free")
        params = requests[0][2]
        key = batch_key(params)
        if any(batch_key(p) != key for _, _, p in requests) or (self.rows and key != batch_key(self.params)):
            raise ValueError("rows of one batch share temperature and top-p; admit such requests after it drains")
        if any(len(p) == 0 for _, p, _ in requests):
            raise ValueError("every prompt needs at least one token")
        if not self.rows:
            self.params = params
        b = len(requests)
        ids, mask, positions = left_padded([p for _, p, _ in requests], self.engine.pad_id)
        new = [_Row(rid, max(1, p.max_new_tokens), list(p.stop)) for rid, _, p in requests]
        t0 = time.perf_counter()
        with self._held():
            self.engine.profile.hold_s += time.perf_counter() - t0
            self._apply_keep()
            d_mask, d_pos = mask.to(self.engine.device), positions.to(self.engine.device)
            res = self._forward(input_ids=ids.to(self.engine.device), attention_mask=d_mask, position_ids=d_pos)
            tokens, logps, token = self._sample(res.logits[:, -1, :])
            keep, ended = self._record(new, tokens, logps)
            if keep:
                idx = torch.tensor(keep, device=self.engine.device)
                cache = res.past_key_values
                if len(keep) < b:
                    cache.batch_select_indices(idx)
                self._merge(cache, d_mask[idx], d_pos[idx, -1:], token[idx])
                self.rows.extend(new[j] for j in keep)
        self.stats.prefills += 1
        self.stats.admitted += b
        self.stats.busy_s += time.perf_counter() - t0
        self.stats.max_rows = max(self.stats.max_rows, len(self.rows))
        if not self.rows:
            self.params = None
        return ended

    @torch.no_grad()
    def step(self) -> list[tuple[int, Generation]]:
        """One decode step for every live row; the rows that ended."""
        if not self.rows:
            return []
        t0 = time.perf_counter()
        with self._held():
            self.engine.profile.hold_s += time.perf_counter() - t0
            self._apply_keep()
            self._mask = torch.cat([self._mask, torch.ones((len(self.rows), 1), dtype=self._mask.dtype,
                                                           device=self._mask.device)], dim=1)
            self._positions = self._positions + 1
            res = self._forward(input_ids=self._token[:, None], attention_mask=self._mask,
                                position_ids=self._positions, past_key_values=self._cache)
            self._cache = res.past_key_values
            tokens, logps, self._token = self._sample(res.logits[:, -1, :])
        self.stats.steps += 1
        self.engine.profile.steps += 1
        self.stats.row_steps += len(self.rows)
        keep, ended = self._record(self.rows, tokens, logps)
        if not keep:
            self.abort()
        elif len(keep) < len(self.rows):
            self.rows = [self.rows[j] for j in keep]
            self._keep = keep
        self.stats.busy_s += time.perf_counter() - t0
        return ended
