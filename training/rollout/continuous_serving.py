"""Serving continuous batching: the message loop around a decoder, the callers' side, the in-process engine.

- :func:`serve`: runs a :class:`~cuda_agent.training.rollout.continuous.ContinuousDecoder`, fed by messages
  (``submit``, ``load``, ``close``) and answering ``gen`` (one finished row), ``fail`` (a row lost to an error),
  ``ok`` / ``error``. It runs in the generation child process
  (:class:`~cuda_agent.training.rollout.process_engine.ContinuousProcessEngine`) or in a thread
  (:class:`ContinuousEngine`).
- :class:`ContinuousFront`: what episode threads call (``generate`` blocks until the caller's rows end).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from cuda_agent.protocols import Generation, SamplingParams
from cuda_agent.training.rollout.continuous import ContinuousDecoder, Request, batch_key
from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

log = structlog.get_logger("cuda_agent.rollout.continuous")


def serve(decoder: ContinuousDecoder, receive: Callable[[bool], list[tuple[Any, ...]]],
          send: Callable[[tuple[Any, ...]], None], load: Callable[[Any], None]) -> None:
    """Run ``decoder`` until a ``close`` message.

    ``receive(block)`` returns the messages that arrived (waiting for one when ``block``; an empty list when the
    other side went away ends the loop):

    - ``("submit", [(request id, prompt ids, params), ...])``: rows to generate (params: SamplingParams or its dict);
    - ``("load", source)``: new weights, refused (``error``) while rows are live or queued;
    - ``("close",)``: answered ``ok``, then the loop returns.

    ``send`` gets ``("gen", request id, Generation)`` for each row that ends, ``("fail", request id, traceback)``
    for each row an exception ended, and ``("ok", None, None)`` / ``("error", None, message)`` for ``load`` and
    ``close``.
    """
    waiting: deque[Request] = deque()
    while True:
        block = not decoder.live and not waiting
        messages = receive(block)
        if block and not messages:
            return
        for msg in messages:
            if msg[0] == "submit":
                waiting.extend((rid, list(p), SamplingParams.model_validate(s) if isinstance(s, dict) else s)
                               for rid, p, s in msg[1])
            elif msg[0] == "load":
                if decoder.live or waiting:
                    send(("error", None, f"update_weights while {decoder.live} rows are generating and "
                                         f"{len(waiting)} wait: load weights between collections"))
                    continue
                try:
                    load(msg[1])
                    send(("ok", None, None))
                except BaseException:  # noqa: BLE001 - reported to the caller
                    send(("error", None, traceback.format_exc()))
            elif msg[0] == "close":
                for rid in decoder.abort() + [r[0] for r in waiting]:
                    send(("fail", rid, "the generation engine closed"))
                send(("ok", None, None))
                return
            else:
                send(("error", None, f"unknown operation {msg[0]!r}; valid: submit, load, close"))
        batch: list[Request] = []
        while waiting and len(batch) < decoder.room() and decoder.accepts(waiting[0][2]) and (
                not batch or batch_key(waiting[0][2]) == batch_key(batch[0][2])):
            batch.append(waiting.popleft())
        try:
            for rid, g in decoder.admit(batch):
                send(("gen", rid, g))
            batch = []
            for rid, g in decoder.step():
                send(("gen", rid, g))
        except BaseException:  # noqa: BLE001 - the rows in flight fail, the server goes on
            tb = traceback.format_exc()
            log.error("continuous decoding failed", error=tb.splitlines()[-1])
            for rid in decoder.abort() + [r[0] for r in batch]:
                send(("fail", rid, tb))


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: str | None = None


class ContinuousFront:
    """The engine episode threads call: ``generate`` sends its rows to a :func:`serve` loop through ``send`` and
    waits until each has ended; the loop's answers come back through :meth:`deliver`.

    :param send: hands one message to the serving loop (thread-safe).
    :param alive: None, or a callable that raises when the serving side is gone (checked while waiting).
    """

    def __init__(self, send: Callable[[tuple[Any, ...]], None], alive: Callable[[], None] | None = None) -> None:
        self._send = send
        self._alive = alive
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._rows: dict[int, _Pending] = {}
        self._sync: _Pending | None = None
        self._sync_lock = threading.Lock()
        self.decoder_stats: dict[str, float] = {}
        self.latency_s = 0.0
        self.requests = 0

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """One continuation per prompt; returns when all have ended (each was free to end at its own step)."""
        return self.generate_requests([(p, params) for p in prompts])

    def generate_requests(self, requests: Sequence[tuple[list[int], SamplingParams]]) -> list[Generation]:
        """One continuation per ``(prompt, params)``, all submitted at once; returns when all have ended."""
        if any(len(p) == 0 for p, _ in requests):
            raise ValueError("every prompt needs at least one token")
        t0 = time.monotonic()
        with self._lock:
            ids = [next(self._ids) for _ in requests]
            waits = [self._rows.setdefault(i, _Pending()) for i in ids]
        self._send(("submit", [(i, list(p), s) for i, (p, s) in zip(ids, requests, strict=True)]))
        try:
            for w in waits:
                self._wait(w, "generate")
        finally:
            with self._lock:
                for i in ids:
                    self._rows.pop(i, None)
        errors = [w.error for w in waits if w.error is not None]
        if errors:
            raise RuntimeError(f"continuous generation failed: {errors[0]}")
        with self._lock:
            self.latency_s += time.monotonic() - t0
            self.requests += len(requests)
        return [w.result if isinstance(w.result, Generation) else Generation.model_validate(w.result) for w in waits]

    def call(self, message: tuple[Any, ...], what: str) -> None:
        """Send a ``load`` or ``close`` message and wait for its ``ok`` (raises on ``error``)."""
        with self._sync_lock:
            self._sync = _Pending()
            self._send(message)
            self._wait(self._sync, what)
            if self._sync.error is not None:
                raise RuntimeError(f"{what} failed in the generation loop: {self._sync.error}")

    def deliver(self, msg: tuple[Any, ...]) -> None:
        """An answer of the serving loop (see :func:`serve`)."""
        kind, rid, payload = msg[0], msg[1], msg[2]
        if len(msg) > 3:
            self.decoder_stats = msg[3]
        if kind in ("gen", "fail"):
            with self._lock:
                pending = self._rows.get(rid)
            if pending is not None:
                if kind == "gen":
                    pending.result = payload
                else:
                    pending.error = str(payload).strip().splitlines()[-1] if payload else "failed"
                pending.done.set()
        elif self._sync is not None:
            self._sync.error = None if kind == "ok" else str(payload)
            self._sync.done.set()

    def fail_all(self, why: str) -> None:
        """The serving side is gone: every waiting caller gets ``why``."""
        with self._lock:
            pending = list(self._rows.values())
        for p in pending + ([self._sync] if self._sync is not None else []):
            if not p.done.is_set():
                p.error = why
                p.done.set()

    def _wait(self, pending: _Pending, what: str) -> None:
        while not pending.done.wait(1.0):
            if self._alive is not None:
                self._alive()

    def stats_dict(self) -> dict[str, float]:
        """The decoder's counters and the callers' mean wait per request."""
        return {**self.decoder_stats, "gen_requests": float(self.requests),
                "gen_latency_s_mean": self.latency_s / self.requests if self.requests else 0.0}


class FrontStats:
    """``stats.as_dict()`` of a continuous engine (as ``BatchingEngine.stats``): the decoder's counters and the
    callers' mean wait per request."""

    def __init__(self, front: ContinuousFront) -> None:
        self.front = front

    def as_dict(self) -> dict[str, float]:
        """See :meth:`ContinuousFront.stats_dict`."""
        return self.front.stats_dict()


class ContinuousEngine:
    """Continuous batching in this process: a thread runs :func:`serve` over ``engine``'s model.

    :param engine: a loaded :class:`HFRolloutEngine` (its ``step_hold`` is held around every forward).
    :param max_rows: rows decoded together at most.
    :param seed: seed of the sampling generator (None: random).
    """

    def __init__(self, engine: HFRolloutEngine, *, max_rows: int = 64, seed: int | None = None) -> None:
        self.engine = engine
        self.decoder = ContinuousDecoder(engine, max_rows, seed)
        self._inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.front = ContinuousFront(self._inbox.put)
        self.stats = FrontStats(self.front)
        self._thread = threading.Thread(target=self._run, name="continuous-generate", daemon=True)
        self._thread.start()

    def _receive(self, block: bool) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        if block:
            out.append(self._inbox.get())
        while True:
            try:
                out.append(self._inbox.get_nowait())
            except queue.Empty:
                return out

    def _deliver(self, msg: tuple[Any, ...]) -> None:
        self.front.deliver((*msg, self.decoder.stats.as_dict()) if msg[0] in ("gen", "fail") else msg)

    def _run(self) -> None:
        try:
            serve(self.decoder, self._receive, self._deliver, self.engine.update_weights)
        finally:
            self.front.fail_all("the continuous generation thread ended")

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """One continuation per prompt (blocks until they end)."""
        if not self._thread.is_alive():
            raise RuntimeError("the continuous generation thread has ended; this engine cannot generate any more")
        return self.front.generate(prompts, params)

    def update_weights(self, source: Any) -> None:
        """Load new weights (between collections: refused while rows are generating)."""
        self.front.call(("load", source), "update_weights")

    def wake(self) -> None:
        """Nothing to re-check: rows join at the next step."""

    def close(self) -> None:
        """Stop the serving thread (rows still generating fail)."""
        if self._thread.is_alive():
            self.front.call(("close",), "close")
        self._thread.join(timeout=30)
