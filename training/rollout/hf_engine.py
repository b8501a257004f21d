"""Batched token-in/token-out sampling with log-probs from a local transformers causal LM.

The sampling loop is written out (left-padded batch, KV cache, temperature
and nucleus filtering, a seeded generator per call) so the reported log-prob
of every sampled token is exactly the quantity the trainer recomputes with
:func:`cuda_agent.training.logprobs.token_logprobs` at the same temperature.
With ``temperature == 0`` (greedy) the reported log-probs are those of the
untempered distribution.
"""

from __future__ import annotations

import contextlib
import inspect

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import torch

from cuda_agent.protocols import Generation, SamplingParams
from cuda_agent.training.attention import ATTENTION_BACKENDS, attention_backends
from cuda_agent.training.logprobs import selected_logprobs

log = structlog.get_logger("cuda_agent.rollout.hf")

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(name: str | torch.dtype) -> torch.dtype:
    """``"float32"``/``"bfloat16"``/``"float16"`` (or a torch dtype) to a torch dtype."""
    if isinstance(name, torch.dtype):
        return name
    if name not in _DTYPES:
        raise ValueError(f"unknown dtype {name!r}; valid: {', '.join(_DTYPES)}")
    return _DTYPES[name]


def _nucleus_mask(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Logits with everything outside the smallest set of mass >= top_p set to -inf."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    probs = sorted_logits.softmax(-1)
    outside = probs.cumsum(-1) - probs > top_p  # keep the token that crosses top_p
    sorted_logits = sorted_logits.masked_fill(outside, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def sample_tokens(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The next token of every row from its last logits ``[rows, vocab]``, and its log-prob under the sampling
    distribution (tempered and nucleus-filtered; the untempered one when greedy, ``temperature <= 0``)."""
    logits = logits.float()
    if params.temperature <= 0:
        token = logits.argmax(-1)
        return token, selected_logprobs(logits, token)
    tempered = _nucleus_mask(logits / params.temperature, params.top_p)
    token = torch.multinomial(tempered.softmax(-1), 1, generator=gen).squeeze(-1)
    return token, selected_logprobs(tempered, token)


def left_padded(prompts: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Host tensors ``[rows, longest]`` of a left-padded batch: token ids, attention mask, position ids (every
    row's next token is at the end)."""
    b, width = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    mask = torch.zeros((b, width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


@dataclass
class BatchProfile:
    """Where the last ``generate_requests`` spent its time: decode steps, wall and CPU seconds of the calling
    process, and seconds waiting at each step's device sync (the GPU still busy: its own kernels, or time-sliced
    with another process's). ``cpu_s`` near ``wall_s`` means host-bound (Python, launches, or a starved core)."""

    steps: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    sync_s: float = 0.0
    hold_s: float = 0.0  # waiting to enter the per-step hold (a timed batch had the device)

    def as_log(self) -> dict[str, float]:
        """Rounded fields for a log line (``gen_`` prefixed)."""
        return {"gen_steps": self.steps, "gen_wall_s": round(self.wall_s, 2), "gen_cpu_s": round(self.cpu_s, 2),
                "gen_sync_s": round(self.sync_s, 2), "gen_hold_s": round(self.hold_s, 2)}


class HFRolloutEngine:
    """A :class:`~cuda_agent.protocols.RolloutEngine` over a transformers causal LM.

    :param model: a loaded model, or a path/hub-free folder to load with ``AutoModelForCausalLM``.
    :param tokenizer: used for EOS ids and stop strings; loaded from ``model`` when it is a path.
    :param device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...
    :param dtype: weights dtype when loading from a path.
    :param batch_size: prompts generated together at most.
    """

    def __init__(self, model: Any, tokenizer: Any = None, *, device: str = "cpu",
                 dtype: str | torch.dtype = "float32", batch_size: int = 8) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.dtype = resolve_dtype(dtype)
        self.device = torch.device(device)
        if isinstance(model, (str, Path)):
            path = Path(model)
            if not (path / "config.json").exists():
                raise FileNotFoundError(f"model folder {path} has no config.json (expected a save_pretrained folder)")
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        eos = getattr(model.generation_config, "eos_token_id", None)
        self.eos_ids: set[int] = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tokenizer is not None and tokenizer.eos_token_id is not None:
            self.eos_ids.add(int(tokenizer.eos_token_id))
        pad = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
        self.pad_id = int(pad if pad is not None else min(self.eos_ids, default=0))
        self.profile = BatchProfile()  # of the last generate_requests
        #: Forward kwargs of every sampling forward: only the last position's logits (a prefill of 16 rows x 3000
        #: tokens x a 2048 vocabulary otherwise computes 393 MB of fp32 logits to read 16 rows of them).
        self.forward_kwargs: dict[str, Any] = (
            {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.model.forward).parameters else {})
        #: SDPA backends of generation's forwards (training.attention.ATTENTION_BACKENDS); None = torch's choice.
        self.attention: tuple[str, ...] | None = ATTENTION_BACKENDS
        #: Held around each decode step's device work, which ends with the step's sync (e.g. the device's timing lock
        #: in the shared mode: a timed batch waits for one step, not a whole batch); None = nothing held.
        self.step_hold: Any = None

    # ------------------------------------------------------------------ generation
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """Sample one continuation per prompt; ``output_ids`` include the EOS token when it was sampled."""
        return self.generate_requests([(p, params) for p in prompts])

    def generate_requests(self, requests: Sequence[tuple[list[int], SamplingParams]]) -> list[Generation]:
        """One continuation per ``(prompt, params)``: rows batched ``batch_size`` at a time (left padding, KV cache).

        Rows of one batch share temperature, top-p and stop strings (requests that differ go to separate
        batches); each row keeps its own ``max_new_tokens``. The batch's generator is seeded from the rows'
        seeds (random when one has none), so a batch is reproducible given its rows and their order.
        """
        if any(len(p) == 0 for p, _ in requests):
            raise ValueError("every prompt needs at least one token")
        self.profile = BatchProfile()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        out: list[Generation | None] = [None] * len(requests)
        groups: dict[tuple[float, float, tuple[str, ...]], list[int]] = {}
        for i, (_, p) in enumerate(requests):
            groups.setdefault((p.temperature, p.top_p, tuple(p.stop)), []).append(i)
        for rows in groups.values():
            for start in range(0, len(rows), self.batch_size):
                chunk = rows[start:start + self.batch_size]
                seeds = [requests[i][1].seed for i in chunk]
                seed = None if any(s is None for s in seeds) else (seeds[0] + start if len(chunk) == 1 else
                                                                    hash(tuple(seeds)) & 0x7FFFFFFF)
                with attention_backends(self.attention):
                    gens = self._generate_batch([requests[i][0] for i in chunk], requests[chunk[0]][1], seed,
                                                [requests[i][1].max_new_tokens for i in chunk])
                for i, g in zip(chunk, gens):
                    out[i] = g
        self.profile.wall_s = time.perf_counter() - wall0
        self.profile.cpu_s = time.process_time() - cpu0
        return [g for g in out if g is not None]

    @torch.no_grad()
    def _generate_batch(self, prompts: Sequence[list[int]], params: SamplingParams, seed: int | None,
                        max_new: Sequence[int] | None = None) -> list[Generation]:
        b = len(prompts)
        limits = list(max_new) if max_new is not None else [params.max_new_tokens] * b
        ids, mask, positions = left_padded(prompts, self.pad_id)  # on the host: the device is touched inside holds only
        gen = torch.Generator(device=self.device)
        if seed is not None:
            gen.manual_seed(seed)
        else:
            gen.seed()
        outputs: list[list[int]] = [[] for _ in range(b)]
        logps: list[list[float]] = [[] for _ in range(b)]
        reasons = ["length"] * b
        live = list(range(b))  # original row of each row still in the batch

        def step(inputs: Any) -> tuple[list[int], list[float]]:
            """One step's device work, all of it inside ``step_hold`` (its sync ends it): ``inputs()`` builds the
            forward's inputs, the forward runs, the next tokens are sampled and brought to the host."""
            t_hold = time.perf_counter()
            with self.step_hold if self.step_hold is not None else contextlib.nullcontext():
                self.profile.hold_s += time.perf_counter() - t_hold
                res = self.model(**inputs(), use_cache=True, **self.forward_kwargs)
                state["cache"] = res.past_key_values
                token, logp = sample_tokens(res.logits[:, -1, :], params, gen)
                t_sync = time.perf_counter()
                step_tokens, step_logps = token.tolist(), logp.tolist()  # one device sync per step
                self.profile.sync_s += time.perf_counter() - t_sync
            self.profile.steps += 1
            state["token"] = token
            return step_tokens, step_logps

        state: dict[str, Any] = {}

        def prefill_inputs() -> dict[str, Any]:
            state["mask"], state["positions"] = mask.to(self.device), positions.to(self.device)
            return {"input_ids": ids.to(self.device), "attention_mask": state["mask"],
                    "position_ids": state["positions"]}

        def decode_inputs(keep: list[int], shrink: bool) -> dict[str, Any]:
            """The next step's inputs from the last one's state (device work: called inside the hold)."""
            token, mask, positions = state["token"], state["mask"], state["positions"]
            if shrink:  # drop finished rows: the batch shrinks with its cache
                idx = torch.tensor(keep, device=self.device)
                state["cache"].batch_select_indices(idx)
                token, mask, positions = token[idx], mask[idx], positions[idx]
            state["mask"] = torch.cat([mask, torch.ones((len(keep), 1), dtype=mask.dtype, device=self.device)], dim=1)
            state["positions"] = positions[:, -1:] + 1
            return {"input_ids": token[:, None], "attention_mask": state["mask"],
                    "position_ids": state["positions"], "past_key_values": state["cache"]}

        step_tokens, step_logps = step(prefill_inputs)
        for _ in range(max(limits)):
            keep: list[int] = []
            for j, i in enumerate(live):
                t = step_tokens[j]
                outputs[i].append(t)
                logps[i].append(step_logps[j])
                if t in self.eos_ids or self.hit_stop(outputs[i], params.stop):
                    reasons[i] = "stop"
                elif len(outputs[i]) < limits[i]:
                    keep.append(j)
            if not keep:
                break
            shrink = len(keep) < len(live)
            live = [live[j] for j in keep]
            step_tokens, step_logps = step(lambda: decode_inputs(keep, shrink))  # noqa: B023 - called at once
        return [Generation(output_ids=o, logprobs=lp, finish_reason=r) for o, lp, r in zip(outputs, logps, reasons)]

    def hit_stop(self, output: list[int], stop: list[str]) -> bool:
        """Whether the tail of ``output`` holds one of the stop strings (needs the tokenizer)."""
        if not stop or self.tokenizer is None:
            return False
        tail = self.tokenizer.decode(output[-32:], skip_special_tokens=False)
        return any(s in tail for s in stop)

    # ------------------------------------------------------------------ weights
    def update_weights(self, source: str | Path | dict[str, Any]) -> None:
        """Load new actor weights from a state dict or an HF ``save_pretrained`` folder (strict: names must match)."""
        if isinstance(source, dict):
            state = source
        else:
            from transformers import AutoModelForCausalLM

            path = Path(source)
            if not (path / "config.json").exists():
                raise FileNotFoundError(f"weights folder {path} has no config.json (expected a save_pretrained folder)")
            state = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).state_dict()
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        # Tied or persistent-buffer-free names may be absent; anything else is an error.
        missing = [k for k in missing if not k.endswith("rotary_emb.inv_freq")]
        if missing or unexpected:
            raise ValueError(
                f"update_weights: state dict does not match the rollout model "
                f"(missing: {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                f"unexpected: {unexpected[:5]}{'...' if len(unexpected) > 5 else ''})"
            )
        log.info("rollout weights updated", tensors=len(state))
