"""Running a task once in a sandboxed subprocess (the probe) and what can go wrong there.

:func:`run_probe` sizes one input set on the meta device first (a child request that allocates nothing), reserves
that footprint in the device's memory budget (:mod:`~cuda_agent.harness.memory_budget`, the one every evaluator of
the run shares), and only then runs the task for real: probes of big tasks started side by side wait their turn
instead of each reading the same free memory and running out together. A task whose one set cannot fit even alone
fails at once as ``too_large``, naming the bytes needed and available. A real run that still runs out of memory
(other work on the GPU took more than it reserved) is run once more holding the whole budget alone, and only then
fails as ``out_of_memory``. :mod:`cuda_agent.harness.tasks` builds the manifest from the facts.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from typing import Any, Literal

import structlog

from cuda_agent.errors import CudaAgentError

log = structlog.get_logger(__name__)

#: Longest a probe waits for memory other probes and sessions hold.
PROBE_WAIT_S = 1800.0
from cuda_agent.harness._probe_server import probe_command, served_probe


class TaskProbeError(CudaAgentError):
    """A task file could not be loaded: missing definitions, an exception, a timeout.

    ``kind`` is one of: ``syntax_error``, ``import_error``, ``missing_definition``,
    ``init_inputs_error``, ``model_error``, ``inputs_error``, ``forward_error``,
    ``timeout``, ``crash``, ``bad_cpu_sizes``, ``missing_file``, ``too_large`` (one input set does not fit in
    memory), ``out_of_memory`` (the run ran out of memory; in a memory budget, again when retried holding the
    device alone: the machine's memory, not the task file, is at fault, and the message does not say "bad task").
    """

    def __init__(self, kind: str, message: str, source: str = "") -> None:
        where = f" ({source})" if source else ""
        head = "out of memory probing the task" if kind == "out_of_memory" else "bad task"
        super().__init__(f"{head}{where}: [{kind}] {message}")
        self.kind = kind
        #: Figures behind the failure (``too_large`` and ``out_of_memory``: ``needed_bytes``, ``available_bytes``,
        #: ``device``).
        self.details: dict[str, Any] = {}


# --------------------------------------------------------------------------- probe
def _probe_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def run_probe(
    code: str,
    *,
    device: str = "cpu",
    seed: int = 0,
    timeout_s: float = 120.0,
    startup_timeout_s: float = 180.0,
    isolation: Literal["auto", "bwrap", "process"] = "auto",
    source: str = "",
    memory_limit_bytes: int | None = None,
) -> dict[str, Any]:
    """Run the task module once in a sandboxed subprocess; return the child's facts.

    Memory: by default the task is sized on the meta device first (a request that allocates nothing), that size is
    reserved in the device's budget for the real run, and a task that cannot fit even alone raises ``too_large``
    naming both figures; a task the meta device cannot run reserves the whole budget for its real run.
    ``memory_limit_bytes`` instead gives the child a fixed limit (its own meta-device gate; no budget).
    A real run in the budget that fails with ``out_of_memory`` is retried once holding the whole budget
    (:meth:`~cuda_agent.harness.memory_budget.MemoryBudget.reserve_exclusive`); a second ``out_of_memory`` is
    final and names the bytes needed and the budget's capacity.

    ``timeout_s`` counts from the moment torch is imported in the child (so a
    slow interpreter start does not eat the task's budget). A warm probe server
    (:mod:`~cuda_agent.harness._probe_server`: torch imported once, a forked
    child per task, the same sandbox) answers when it can; otherwise a fresh
    process runs the task.
    """
    budget = _budget(device) if memory_limit_bytes is None else None
    if budget is None:
        limit = memory_limit_bytes if memory_limit_bytes is not None else probe_memory_limit(device)
        return _probe(code, device, seed, timeout_s, startup_timeout_s, isolation, source,
                      {"memory_limit_bytes": limit} if limit else {})
    sized = _probe(code, device, seed, timeout_s, startup_timeout_s, isolation, source, {"meta_only": True})
    fp = sized.get("footprint") or {}
    # A task the meta device cannot run (``.item()``, data-dependent shapes) has an unknown size: its real run
    # takes the whole budget, so it never allocates beside others that took the same free bytes.
    need = budget.capacity
    if fp.get("method") == "meta":  # one set, two forwards' outputs, the parameters: what the real run allocates
        need = int(fp["param_bytes"]) + int(fp["input_bytes"]) + 2 * int(fp["output_bytes"])
    if need > budget.capacity:
        error = TaskProbeError("too_large", f"the task needs {need / 2**30:.1f} GiB on {device} for one input set "
                               f"(inputs {fp['input_bytes'] / 2**30:.2f} GiB, outputs {fp['output_bytes'] / 2**30:.2f} "
                               f"GiB, parameters {fp['param_bytes'] / 2**30:.2f} GiB) but {budget.capacity / 2**30:.1f} "
                               "GiB is available", source)
        error.details = {"needed_bytes": need, "available_bytes": budget.capacity, "device": device}
        raise error
    try:
        with budget.reserve(need, f"probe of {source or 'a task'}", timeout_s=PROBE_WAIT_S, admission=True):
            return _probe(code, device, seed, timeout_s, startup_timeout_s, isolation, source, {})
    except TaskProbeError as exc:
        if exc.kind != "out_of_memory":
            raise
        first = exc
    # Other work on the device may have taken more than it reserved: once more with the device to itself (the
    # ordinary reservation is released first, or the exclusive one would wait for it).
    log.warning("probe.oom_retry", source=source, device=device, needed_bytes=need, capacity=budget.capacity,
                error=str(first)[:300])
    try:
        with budget.reserve_exclusive(f"probe of {source or 'a task'} alone (retry after an out-of-memory error)",
                                      timeout_s=PROBE_WAIT_S):
            return _probe(code, device, seed, timeout_s, startup_timeout_s, isolation, source, {})
    except TaskProbeError as exc:
        if exc.kind != "out_of_memory":
            raise
        raise _out_of_memory_alone(exc, need, fp, budget.capacity, device, source) from exc


def _out_of_memory_alone(exc: TaskProbeError, need: int, fp: dict[str, Any], capacity: int, device: str,
                         source: str) -> TaskProbeError:
    """The final ``out_of_memory`` error: the retry held the whole budget and still ran out."""
    sized = ("from its meta-device footprint: parameters, one input set, two forwards' outputs; the forward's "
             "temporaries come on top" if fp.get("method") == "meta" else
             "the whole budget: the meta device could not size it")
    child = str(exc).split("[out_of_memory] ", 1)[-1]
    error = TaskProbeError(
        "out_of_memory", f"the task ran out of memory on {device} twice, the second time running alone (it held the "
        f"whole memory budget, {capacity} bytes = {capacity / 2**30:.1f} GiB); it needs {need} bytes = "
        f"{need / 2**30:.2f} GiB ({sized}). Memory other processes hold on the device, or the forward's "
        f"temporaries, left too little: a memory failure on this machine, not a fault in the task file. Last "
        f"error: {child}", source)
    error.details = {"needed_bytes": need, "available_bytes": capacity, "device": device}
    return error


def size_on_meta(code: str, *, device: str = "cpu", timeout_s: float = 120.0, source: str = "") -> dict[str, Any]:
    """The task's one-set footprint from a run on the meta device, in the probe's sandboxed child (nothing is
    allocated): ``{'method': 'meta', 'input_bytes', 'output_bytes', 'param_bytes'}``, or ``{'method':
    'unavailable', 'reason'}`` where the task cannot run on meta. :class:`TaskProbeError` where it cannot load."""
    facts = _probe(code, device, 0, timeout_s, 180.0, "auto", source, {"meta_only": True})
    return dict(facts.get("footprint") or {"method": "unavailable", "reason": "the probe returned no footprint"})


def _budget(device: str) -> Any:
    """The memory budget probes on ``device`` reserve in (the run's default one for that device), or None where
    free memory cannot be read (no NVML: the probe's own meta-device gate against the memory free then applies)."""
    from cuda_agent.harness.memory_budget import budget_for

    kind, _, index = device.partition(":")
    try:
        return budget_for("cuda" if kind == "cuda" else "cpu", int(index or 0))
    except Exception:  # noqa: BLE001 - NVML missing or the device unreadable
        return None


def _probe(code: str, device: str, seed: int, timeout_s: float, startup_timeout_s: float, isolation: str,
           source: str, extra: dict[str, Any]) -> dict[str, Any]:
    """One probe request (warm server, else a fresh process); the facts, or :class:`TaskProbeError`. A real run
    on a CUDA device holds the device's timing lock around its device work (:func:`device_hold_request`)."""
    if device.startswith("cuda") and not extra.get("meta_only") and "timing_lock" not in extra:
        from cuda_agent.harness.device_lock import device_timing_lock

        extra = {**extra, **device_hold_request(device_timing_lock("cuda", int(device.partition(":")[2] or 0)),
                                                timeout_s)}
    answer = served_probe(code, device=device, seed=seed, timeout_s=timeout_s, startup_timeout_s=startup_timeout_s,
                          isolation=isolation, extra=extra)
    facts, stderr_tail = answer or _one_shot_probe(code, device, seed, timeout_s, startup_timeout_s, isolation, source,
                                                   extra)
    if facts.get("ok"):
        return facts
    kind = facts.get("kind", "error")
    if kind == "too_large":
        error = TaskProbeError(kind, facts.get("message", "the task does not fit in memory"), source)
        error.details = {k: facts[k] for k in ("needed_bytes", "available_bytes", "device") if k in facts}
        raise error
    if kind == "timeout":
        raise TaskProbeError("timeout", f"running the task (import, Model(*get_init_inputs()), get_inputs(), "
                             f"forward: {timeout_s:.0f} s) took longer than the limit", source)
    if kind == "crash" and "message" not in facts:
        raise TaskProbeError("crash", f"the task process died (exit code {facts.get('exit_code')}) without a "
                             f"result: {stderr_tail}", source)
    raise TaskProbeError(kind, facts.get("message", "unknown failure"), source)


def device_hold_request(lock: Any, timeout_s: float) -> dict[str, Any]:
    """Request fields that make a probe's real run hold ``lock`` (a
    :class:`~cuda_agent.harness.device_lock.TimingLock`) in the shared mode from the model's creation to the last
    forward, so that it never runs beside a timed batch. The wait counts against the probe's time limit, so it is
    bounded (a quarter of it, at most 60 s; past that the run goes on without the hold and its facts say so).
    Nothing where this thread holds the lock already: that hold covers the run, and the child would wait on a
    turnstile that an exclusive waiter holds behind it.

    On the CPU backend probes take no hold: builds and other CPU work run beside its timed batches anyway."""
    if lock.path_for_child() is None:
        return {}
    for path in (lock.path, lock.turnstile):  # the sandbox binds them: they must exist
        os.close(os.open(path, os.O_CREAT | os.O_RDONLY, 0o666))
    return {"timing_lock": [str(lock.path), str(lock.turnstile)], "lock_wait_s": min(60.0, timeout_s / 4)}


def probe_memory_limit(device: str) -> int | None:
    """Bytes a probe may allocate on ``device``: a share of the memory free now (see
    :mod:`~cuda_agent.harness.memory_budget`), or None when it cannot be read."""
    from cuda_agent.harness.memory_budget import USABLE_SHARE, measure_free_bytes

    kind, _, index = device.partition(":")
    try:
        return int(USABLE_SHARE * measure_free_bytes("cuda" if kind == "cuda" else "cpu", int(index or 0)))
    except Exception:  # noqa: BLE001 - no NVML here: the probe runs unguarded, as before
        return None


def _one_shot_probe(
    code: str, device: str, seed: int, timeout_s: float, startup_timeout_s: float, isolation: str, source: str,
    extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str]:
    """(answer, stderr tail) of the task run in a fresh sandboxed process (answers as a probe server's)."""
    proc = subprocess.Popen(
        probe_command(isolation, device.startswith("cuda"), lock_files=tuple((extra or {}).get("timing_lock") or ())),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    stderr_chunks: list[str] = []

    def pump_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if sum(map(len, stderr_chunks)) < 20000:
                stderr_chunks.append(line)

    threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=pump_err, daemon=True).start()
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({**(extra or {}), "code": code, "device": device, "seed": seed}))
    proc.stdin.close()

    def next_line(seconds: float) -> str | None:
        try:
            return lines.get(timeout=seconds)
        except queue.Empty:
            proc.kill()
            proc.wait()
            raise TimeoutError from None

    try:
        try:
            first = next_line(startup_timeout_s)
        except TimeoutError:
            raise TaskProbeError("timeout", f"starting the probe (import torch, {startup_timeout_s:.0f} s) took "
                                 "longer than the limit", source) from None
        if first is None or first.strip() != "READY":
            proc.wait()
            raise TaskProbeError("crash", f"the probe process died at start: {''.join(stderr_chunks)[-2000:]}", source)
        try:
            result = next_line(timeout_s)
        except TimeoutError:
            return {"ok": False, "kind": "timeout"}, ""
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if result is None:
        return {"ok": False, "kind": "crash", "exit_code": proc.returncode}, "".join(stderr_chunks)[-2000:]
    return json.loads(result), ""
