"""The probe worker process: runs synthesized tasks one at a time and measures them.

Started by :class:`cuda_agent.training.synthesis.execution_probe.ProbeWorker`
as ``python -m cuda_agent.training.synthesis.probe_child``; reads one JSON
request per stdin line, answers one JSON line on the original stdout (the
task's own prints go to stderr). Never imports anything from cuda_agent but
this file, so a task cannot reach harness state through it. Anything a task
does wrong is caught and reported; a crash or hang is the parent's to handle.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any


def _tensors(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


class _RssSampler:
    """Peak RSS of this process while running (CPU memory measure)."""

    def __init__(self) -> None:
        import psutil

        self.proc = psutil.Process()
        self.base = self.proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


@contextlib.contextmanager
def _device_lock(settings: dict[str, Any]) -> Iterator[None]:
    """Hold the per-device lock file (if any): no other worker runs eager work or timings meanwhile."""
    import fcntl

    lock_path = settings.get("timing_lock")
    if not lock_path:
        yield
        return
    with open(lock_path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _timed(fn: Any, device: str, settings: dict[str, Any]) -> float:
    """Median milliseconds of ``fn()`` after warm-up (the caller holds the device lock)."""
    for _ in range(settings.get("warmup", 2)):
        fn()
    _sync(device)
    times: list[float] = []
    budget = settings.get("timing_budget_s", 1.0)
    start = time.perf_counter()
    while len(times) < settings.get("min_repeats", 3) or (
        time.perf_counter() - start < budget and len(times) < settings.get("max_repeats", 50)
    ):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(code: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Everything the task filters judge, for one task module."""
    device = settings.get("device", "cpu")
    seed = int(settings.get("seed", 0))
    rep: dict[str, Any] = {"device": device, "eager_ok": False, "compile_ok": False}
    # Eager runs and timings hold the device lock (parallel workers would disturb the timings);
    # torch.compile, mostly CPU-side code generation, runs outside it.
    try:
        with _device_lock(settings):
            model, inputs, out = _measure_eager(code, rep, device, seed, settings)
    except Exception as exc:  # noqa: BLE001 - any task failure is a verdict, not a crash
        rep["eager_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        return rep
    return _measure_compile(model, inputs, out, rep, device, settings)


def _measure_eager(code: str, rep: dict[str, Any], device: str, seed: int, settings: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    """Build, run (same inputs twice, other inputs once), measure memory and time; fills ``rep``."""
    import torch

    ns: dict[str, Any] = {"__name__": "synth_task"}
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()  # the peak then covers weights, inputs, activations and outputs
    exec(compile(code, "<task>", "exec"), ns)  # noqa: S102 - the probe's purpose
    torch.manual_seed(seed)
    with torch.device(device):
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = ns["get_inputs"]()
    model = model.to(device)
    torch.manual_seed(seed + 1)
    with torch.device(device):
        other_inputs = ns["get_inputs"]()
    rep["input_shapes"] = [list(t.shape) for t in _tensors(inputs)]
    rep["input_dtypes"] = [str(t.dtype).replace("torch.", "") for t in _tensors(inputs)]
    with torch.no_grad(), _RssSampler() as rss:
        out = _tensors(model(*inputs))
        _sync(device)
        out_again = _tensors(model(*inputs))
        out_other = _tensors(model(*other_inputs))
        _sync(device)
    if not out:
        raise TypeError("forward returned no tensor")
    rep["eager_ok"] = True
    rep["output_shapes"] = [list(t.shape) for t in out]
    rep["output_dtypes"] = [str(t.dtype).replace("torch.", "") for t in out]
    if device.startswith("cuda"):
        rep["peak_mem_mb"] = torch.cuda.max_memory_allocated() / 2**20
    else:
        analytic = sum(t.numel() * t.element_size() for t in out + _tensors(inputs))
        analytic += sum(p.numel() * p.element_size() for p in model.parameters())
        rep["peak_mem_mb"] = max(rss.peak - rss.base, analytic) / 2**20
    rep["deterministic"] = len(out) == len(out_again) and all(torch.equal(a, b) for a, b in zip(out, out_again))
    a = out[0].double()
    rep["finite"] = all(bool(torch.isfinite(t).all()) for t in out)
    if rep["finite"] and a.numel() > 0:
        scale = float(a.abs().mean()) + 1e-12
        rep["rel_std"] = float(a.std()) / scale if a.numel() > 1 else 0.0
        rep["value_span"] = float(a.max() - a.min())
        b = out_other[0].double()
        rep["rel_input_diff"] = float((a - b).abs().max()) / scale if a.shape == b.shape else 1.0
    with torch.no_grad():
        rep["eager_ms"] = _timed(lambda: model(*inputs), device, settings)
    return model, inputs, out


def _measure_compile(model: Any, inputs: Any, out: list[Any], rep: dict[str, Any], device: str,
                     settings: dict[str, Any]) -> dict[str, Any]:
    """Run the torch.compile'd model once and compare with eager; fills ``rep``."""
    import torch

    backend = settings.get("compile_backend", "inductor")
    if backend:
        try:
            torch._dynamo.reset()
            compiled = torch.compile(model, backend=backend)
            with torch.no_grad():
                out_c = _tensors(compiled(*inputs))
                _sync(device)
            rep["compile_ok"] = True
            rep["compile_matches"] = all(
                torch.allclose(x.double(), y.double(), atol=1e-2, rtol=1e-2, equal_nan=True) for x, y in zip(out, out_c)
            )
            if settings.get("time_compiled", False):
                with torch.no_grad(), _device_lock(settings):
                    rep["compile_ms"] = _timed(lambda: compiled(*inputs), device, settings)
        except Exception as exc:  # noqa: BLE001
            rep["compile_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        finally:
            torch._dynamo.reset()
    return rep


def _exit_with_parent() -> None:
    """Exit when the parent dies (its session does not: a SIGKILLed build must not leave a busy worker behind)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    """Serve requests until stdin closes (or the parent dies)."""
    _exit_with_parent()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the task's prints must not corrupt the protocol
    import torch

    threads = int(os.environ.get("CUDA_AGENT_PROBE_THREADS", "1"))
    torch.set_num_threads(threads)
    out.write(json.dumps({"ready": True, "torch": torch.__version__}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rep = measure(req["code"], req.get("settings", {}))
        out.write(json.dumps({"id": req.get("id"), "report": rep}) + "\n")
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()  # cached blocks of this task must not starve the other workers


if __name__ == "__main__":
    main()
