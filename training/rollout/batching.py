"""One rollout engine shared by concurrent episodes: their ``generate`` calls are served in batches.

Each episode thread holds its own token-level policy
(:class:`~cuda_agent.training.rollout.token_policy.EngineTokenPolicy`) over a :class:`BatchingEngine`.
A call enqueues its request and waits; one server thread takes every request pending when it is free
(after an optional short gathering wait) and runs them through the wrapped engine's
``generate_requests`` as one left-padded, KV-cached batch. Episodes busy in the environment (compiling,
verifying) simply have no request pending, so the batch is whoever is ready: generation of some
episodes overlaps the builds and device calls of the others.

The contract stays exact: every row's ``output_ids`` and ``logprobs`` are those sampled for that row
(the engine's per-row bookkeeping), whatever else shares its batch.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from cuda_agent.protocols import Generation, SamplingParams

log = structlog.get_logger("cuda_agent.rollout.batching")


@dataclass
class _Request:
    rows: list[tuple[list[int], SamplingParams]]
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Generation] | None = None
    error: BaseException | None = None


@dataclass
class BatchingStats:
    """What the server did: batches, rows, and seconds spent generating."""

    batches: int = 0
    rows: int = 0
    generate_s: float = 0.0
    max_rows: int = 0

    def as_dict(self) -> dict[str, float]:
        """Counters for metrics (mean rows per batch included)."""
        return {"gen_batches": float(self.batches), "gen_rows": float(self.rows), "gen_s": self.generate_s,
                "gen_rows_per_batch": self.rows / self.batches if self.batches else 0.0,
                "gen_max_rows": float(self.max_rows)}


class BatchingEngine:
    """A :class:`~cuda_agent.protocols.RolloutEngine` whose concurrent callers share batches.

    :param engine: an engine with ``generate_requests(list[(prompt ids, params)])`` (e.g.
        :class:`~cuda_agent.training.rollout.hf_engine.HFRolloutEngine`).
    :param gather_s: after the first request of a batch arrives, wait at most this long for
        ``expected()`` requests (0: serve what is there).
    :param expected: how many requests a full batch would hold now (e.g. the episodes still running); None =
        serve at once.
    :param hold: a context manager held around every batch's generation (e.g. the device's timing lock, so that
        no timed measurement runs beside generation on the same device); None = nothing held.
    """

    def __init__(self, engine: Any, *, gather_s: float = 0.0, expected: Any = None, hold: Any = None) -> None:
        self.engine = engine
        self.gather_s = gather_s
        self.expected = expected
        self.hold = hold
        self.stats = BatchingStats()
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="batched-generate", daemon=True)
        self._thread.start()

    # the RolloutEngine protocol --------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """Queue the prompts, wait for the batch that serves them, return their generations."""
        req = _Request(rows=[(list(p), params) for p in prompts])
        with self._cond:
            if self._closed:
                raise RuntimeError("BatchingEngine is closed")
            self._pending.append(req)
            self._cond.notify_all()
        req.done.wait()
        if req.error is not None:
            raise RuntimeError(f"batched generation failed: {type(req.error).__name__}: {req.error}") from req.error
        assert req.result is not None
        return req.result

    def update_weights(self, source: Any) -> None:
        """Delegated (call between collections, when no episode is generating)."""
        self.engine.update_weights(source)

    def wake(self) -> None:
        """Re-check the gathering condition (an episode ended, so fewer requests are to be expected)."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the server thread (pending callers get an error)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    # the server --------------------------------------------------------------------------------
    def _take(self) -> list[_Request] | None:
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if self._closed:
                for r in self._pending:
                    r.error = RuntimeError("BatchingEngine closed")
                    r.done.set()
                self._pending = []
                return None
            if self.gather_s > 0 and self.expected is not None:
                deadline = time.monotonic() + self.gather_s
                while len(self._pending) < int(self.expected()) and not self._closed:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
            taken, self._pending = self._pending, []
            return taken

    def _serve(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            t_wait = time.monotonic()
            try:
                with self.hold if self.hold is not None else contextlib.nullcontext():
                    # Requests that arrived while the hold was awaited join this batch.
                    with self._cond:
                        taken, self._pending = taken + self._pending, []
                    rows: list[tuple[list[int], SamplingParams]] = [row for r in taken for row in r.rows]
                    t0 = time.monotonic()
                    gens: Sequence[Generation] = self.engine.generate_requests(rows)
            except BaseException as exc:  # noqa: BLE001 - every waiting caller gets the error
                for r in taken:
                    r.error = exc
                    r.done.set()
                continue
            self.stats.batches += 1
            self.stats.rows += len(rows)
            self.stats.max_rows = max(self.stats.max_rows, len(rows))
            seconds = time.monotonic() - t0
            self.stats.generate_s += seconds
            # One line per batch: a device run cut before any episode ends still shows the generation rate.
            log.info("batch generated", batch=self.stats.batches, rows=len(rows),
                     prompt_tokens_max=max(len(p) for p, _ in rows),
                     new_tokens=sum(len(g.output_ids) for g in gens), seconds=round(seconds, 2),
                     step_ms=round(1000 * seconds / max(1, max(len(g.output_ids) for g in gens)), 1),
                     hold_wait_s=round(t0 - t_wait, 2), **_profile(self.engine))
            k = 0
            for r in taken:
                r.result = list(gens[k:k + len(r.rows)])
                k += len(r.rows)
                r.done.set()


def _profile(engine: Any) -> dict[str, float]:
    """The engine's profile of its last batch (steps, wall, CPU and device-sync seconds), when it keeps one."""
    profile = getattr(engine, "profile", None)
    return profile.as_log() if hasattr(profile, "as_log") else {}


class HeldEngine:
    """An engine whose every ``generate`` runs while ``hold`` is held (an unbatched policy's engine under its
    device's timing lock, as :class:`BatchingEngine`'s ``hold`` does per batch)."""

    def __init__(self, engine: Any, hold: Any) -> None:
        self.engine = engine
        self.hold = hold

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """Delegated under the hold."""
        with self.hold:
            return self.engine.generate(prompts, params)

    def generate_requests(self, requests: Sequence[tuple[list[int], SamplingParams]]) -> list[Generation]:
        """Delegated under the hold."""
        with self.hold:
            return self.engine.generate_requests(requests)

    def __getattr__(self, name: str) -> Any:  # update_weights, model, eos_ids... of the wrapped engine
        return getattr(self.engine, name)
