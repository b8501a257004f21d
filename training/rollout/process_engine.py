"""The HF rollout engine in a child process of its own, so the decode loop never waits for the GIL.

A decode step of a small model is launch-bound: a few hundred torch ops, and torch releases the GIL around
each of them. In the process that runs a step's episodes, sixteen or more episode threads do Python work
(harness clients, parsing, grading, the memory watchdog), so every release is a chance for another thread to
take the GIL, and getting it back costs up to the interpreter's switch interval (5 ms). Session 19 measured
75-130 ms per decode step on the H200 for a model that steps in a few milliseconds alone;
``benchmarks/generation_contention.py`` reproduces it with busy threads (on this project's 2-core CPU machine:
17 ms alone, 780 ms beside 16 busy threads).

:class:`ProcessRolloutEngine` runs :class:`~cuda_agent.training.rollout.hf_engine.HFRolloutEngine` in a
``spawn`` child whose only thread is the decode loop. Requests and results cross a pipe (a few KB of token ids
per batch); the tokens and log-probs are exactly those the child sampled (the same engine code), so the
trajectory contract is unchanged. A child that dies (killed, out of memory) turns every later call into an
error naming its exit code; it is never silently restarted.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import structlog

from cuda_agent.protocols import Generation, SamplingParams
from cuda_agent.training.rollout.hf_engine import BatchProfile

log = structlog.get_logger("cuda_agent.rollout.process")

#: Seconds the child may take to import torch/transformers and load the model before the start fails.
START_TIMEOUT_S = 600.0


class GenerationProcessError(RuntimeError):
    """The generation child failed: it did not start, it raised, or it died."""


def _serve(conn: Any, model_dir: str, device: str, dtype: str, batch_size: int, hold_steps: bool = False,
           continuous: bool = False) -> None:
    """The child: load the engine, then answer ``(op, payload)`` messages until ``close`` or a closed pipe.
    ``hold_steps``: every decode step holds ``device``'s timing lock in the shared mode. ``continuous``: run the
    continuous-batching loop instead (:func:`~cuda_agent.training.rollout.continuous.serve`, up to ``batch_size``
    rows)."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from cuda_agent.training.rollout.hf_engine import HFRolloutEngine, resolve_dtype

        has_tokenizer = any((Path(model_dir) / f).exists() for f in ("tokenizer.json", "tokenizer_config.json"))
        tokenizer = AutoTokenizer.from_pretrained(model_dir) if has_tokenizer else None  # None: no stop strings
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=resolve_dtype(dtype))
        engine = HFRolloutEngine(model, tokenizer, device=device, dtype=dtype, batch_size=batch_size)
        if hold_steps:
            from cuda_agent.harness.timing_stats import generation_hold

            engine.step_hold = generation_hold(device)
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", {"eos_ids": sorted(engine.eos_ids), "pad_id": engine.pad_id, "pid": os.getpid()}))
    if continuous:
        _serve_continuous(conn, engine, batch_size)
        return
    while True:
        try:
            op, payload = conn.recv()
        except (EOFError, OSError):  # the parent went away
            return
        if op == "close":
            conn.send(("ok", None))
            return
        try:
            if op == "generate":
                rows = [(list(p), SamplingParams.model_validate(s)) for p, s in payload]
                gens = engine.generate_requests(rows)
                conn.send(("ok", {"generations": [g.model_dump() for g in gens], "profile": asdict(engine.profile)}))
            elif op == "load":
                engine.update_weights(_load_source(payload, engine.device))
                conn.send(("ok", None))
            else:
                conn.send(("error", f"unknown operation {op!r}; valid: generate, load, close"))
        except BaseException:  # noqa: BLE001 - one failed request must not end the server
            conn.send(("error", traceback.format_exc()))


def _serve_continuous(conn: Any, engine: Any, max_rows: int) -> None:
    """The child's continuous-batching loop: messages from the pipe, every answer (with the decoder's counters on
    ``gen``/``fail``) back through it."""
    from cuda_agent.training.rollout.continuous import ContinuousDecoder
    from cuda_agent.training.rollout.continuous_serving import serve

    decoder = ContinuousDecoder(engine, max_rows)

    def receive(block: bool) -> list[Any]:
        out: list[Any] = []
        try:
            if block:
                out.append(conn.recv())
            while conn.poll(0):
                out.append(conn.recv())
        except (EOFError, OSError):  # the parent went away
            return out if not block else []
        return out

    def send(msg: tuple[Any, ...]) -> None:
        if msg[0] == "gen":
            msg = ("gen", msg[1], msg[2].model_dump(), decoder.stats.as_dict())
        elif msg[0] == "fail":
            msg = (*msg, decoder.stats.as_dict())
        conn.send(msg)

    serve(decoder, receive, send, lambda payload: engine.update_weights(_load_source(payload, engine.device)))


def _load_source(payload: dict[str, str], device: Any) -> Any:
    """A weights folder as is, or a state dict the parent saved with ``torch.save``."""
    if "folder" in payload:
        return payload["folder"]
    import torch

    return torch.load(payload["state_file"], map_location=device, weights_only=True)


class ProcessRolloutEngine:
    """A :class:`~cuda_agent.protocols.RolloutEngine` whose model lives and samples in a child process.

    :param model_dir: an HF ``save_pretrained`` folder (its tokenizer, when there, serves the stop strings).
    :param device: the child's torch device (``"cpu"``, ``"cuda:0"``...).
    :param dtype: weights dtype (``"float32"``, ``"bfloat16"``...).
    :param batch_size: rows of one batched generate at most.
    :param start_timeout_s: seconds the child may take to load before the start fails.
    :param hold_steps: each decode step in the child holds ``device``'s timing lock in the shared mode (a timed
        batch on that device waits for one step, and generation for the timed batch).
    """

    continuous = False  # the child runs the batch loop (ContinuousProcessEngine: the continuous one)

    def __init__(self, model_dir: str | Path, *, device: str = "cpu", dtype: str = "float32", batch_size: int = 8,
                 start_timeout_s: float = START_TIMEOUT_S, hold_steps: bool = False) -> None:
        path = Path(model_dir)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"model folder {path} has no config.json (expected a save_pretrained folder)")
        ctx = mp.get_context("spawn")  # never fork a process that may hold a CUDA context
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, str(path), device, str(dtype), batch_size, hold_steps,
                                       self.continuous),
                                 name="rollout-engine", daemon=True)
        self._lock = threading.Lock()
        self._tmp = tempfile.TemporaryDirectory(prefix="rollout-engine-")
        self._proc.start()
        child.close()
        t0 = time.monotonic()
        info = self._answer(f"start (loading {path} on {device})", timeout_s=start_timeout_s)
        self.eos_ids: set[int] = set(info["eos_ids"])
        self.pad_id: int = info["pad_id"]
        self.pid: int = info["pid"]
        self.device = device
        self.profile = BatchProfile()  # of the last generate_requests, measured in the child
        log.info("generation process started", pid=self.pid, device=device, seconds=round(time.monotonic() - t0, 1))

    # the RolloutEngine protocol --------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """One continuation per prompt (see :meth:`generate_requests`)."""
        return self.generate_requests([(p, params) for p in prompts])

    def generate_requests(self, requests: Sequence[tuple[list[int], SamplingParams]]) -> list[Generation]:
        """Sampled in the child by :meth:`HFRolloutEngine.generate_requests`, with its batching and seeding."""
        payload = [(list(p), s.model_dump()) for p, s in requests]
        with self._lock:
            self._send(("generate", payload))
            reply = self._answer("generate")
        self.profile = BatchProfile(**reply["profile"])
        return [Generation.model_validate(g) for g in reply["generations"]]

    def update_weights(self, source: str | Path | dict[str, Any]) -> None:
        """Load new actor weights in the child: an HF folder, or a state dict (handed over as a file)."""
        payload = self._load_payload(source)
        with self._lock:
            self._send(("load", payload))
            self._answer("update_weights")

    def close(self) -> None:
        """Stop the child (asked first, then killed after 30 s)."""
        with self._lock:
            if self._proc.is_alive():
                try:
                    self._conn.send(("close", None))
                    if self._conn.poll(30):
                        self._conn.recv()
                except (OSError, EOFError):
                    pass
            self._reap()

    def _load_payload(self, source: str | Path | dict[str, Any]) -> dict[str, str]:
        """What a ``load`` message carries: the folder, or a state dict saved to the hand-over folder."""
        if not isinstance(source, dict):
            return {"folder": str(source)}
        import torch

        state_file = Path(self._tmp.name) / "state.pt"
        torch.save({k: v.detach().cpu() for k, v in source.items()}, state_file)
        return {"state_file": str(state_file)}

    def _reap(self) -> None:
        """Join the child (killed after 30 s), close the pipe, remove the hand-over folder."""
        self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=10)
        self._conn.close()
        self._tmp.cleanup()

    # the pipe ----------------------------------------------------------------------------------
    def _send(self, message: tuple[str, Any]) -> None:
        try:
            self._conn.send(message)
        except (OSError, EOFError) as exc:
            raise self._dead(message[0]) from exc

    def _answer(self, what: str, timeout_s: float | None = None) -> Any:
        """The child's reply; raises when it reports an error, dies, or (with ``timeout_s``) takes too long."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._conn.poll(1.0):
            if not self._proc.is_alive() and not self._conn.poll(0):
                raise self._dead(what)
            if deadline is not None and time.monotonic() > deadline:
                self._proc.kill()
                raise GenerationProcessError(f"generation process: {what} took over {timeout_s:.0f} s; killed it")
        try:
            status, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise self._dead(what) from exc
        if status == "error":
            raise GenerationProcessError(f"generation process: {what} failed in the child:\n{value}")
        return value

    def _dead(self, what: str) -> GenerationProcessError:
        self._proc.join(timeout=5)
        # Two threads joining the dead child (a caller and the continuous engine's reader): the one whose waitpid
        # finds the child already reaped returns before the other has stored the exit code. Give it a moment.
        deadline = time.monotonic() + 2.0
        while self._proc.exitcode is None and time.monotonic() < deadline:  # (is_alive() says True meanwhile)
            time.sleep(0.01)
        code = self._proc.exitcode
        why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return GenerationProcessError(f"generation process (pid {self._proc.pid}) died before {what} ({why}); "
                                      "its model is gone, so this engine cannot generate any more")


class ContinuousProcessEngine(ProcessRolloutEngine):
    """The generation child runs continuous batching
    (:mod:`~cuda_agent.training.rollout.continuous`): concurrent ``generate`` calls from episode threads send their
    rows at once, rows join the child's live batch at its next step, and each caller returns when its own rows end.

    :param batch_size: rows decoded together at most. Other parameters: :class:`ProcessRolloutEngine`.
    """

    continuous = True

    def __init__(self, model_dir: str | Path, **kwargs: Any) -> None:
        super().__init__(model_dir, **kwargs)
        from cuda_agent.training.rollout.continuous_serving import ContinuousFront, FrontStats

        self._send_lock = threading.Lock()
        self.front = ContinuousFront(self._post, alive=self._check_alive)
        self.stats = FrontStats(self.front)
        self._reader = threading.Thread(target=self._read, name="continuous-reader", daemon=True)
        self._reader.start()

    def _post(self, message: tuple[str, Any]) -> None:
        if message[0] == "submit":
            message = ("submit", [(rid, p, s.model_dump()) for rid, p, s in message[1]])
        with self._send_lock:
            self._send(message)

    def _check_alive(self) -> None:
        if not self._proc.is_alive() and not self._reader.is_alive():
            raise self._dead("generate")

    def _read(self) -> None:
        while True:
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                self.front.fail_all(str(self._dead("the answer")))
                return
            self.front.deliver(msg)

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        """One continuation per prompt, each free to end at its own step (blocks until all have ended)."""
        return self.front.generate(prompts, params)

    def generate_requests(self, requests: Sequence[tuple[list[int], SamplingParams]]) -> list[Generation]:
        """Every request's row submitted at once, each with its own settings (rows with other temperature or top-p
        than the live batch wait for it to drain)."""
        return self.front.generate_requests(requests)

    def update_weights(self, source: str | Path | dict[str, Any]) -> None:
        """New weights in the child, between collections (refused while rows generate)."""
        self.front.call(("load", self._load_payload(source)), "update_weights")

    def wake(self) -> None:
        """Nothing to re-check: rows join at the child's next step."""

    def close(self) -> None:
        """Ask the child to stop, then join it (killed after 30 s)."""
        if self._proc.is_alive():
            try:
                self.front.call(("close",), "close")
            except (RuntimeError, GenerationProcessError):
                pass
        self._reap()

