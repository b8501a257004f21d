"""Child side of the task probe: run a KernelBench-format module once and describe it.

Started by :mod:`cuda_agent.harness.tasks` in a sandboxed subprocess (no cuda_agent import needed), one of:

- ``python _task_probe_child.py`` (one-shot): reads a JSON request on stdin ``{"code", "device", "seed"}``,
  prints ``READY`` once torch is imported, then writes one JSON line to the original stdout: either
  ``{"ok": true, ...facts}`` or ``{"ok": false, "kind": ..., "message": ...}``.
- ``python _task_probe_child.py --serve [--sandboxed]`` (warm server): imports torch once, prints ``READY``,
  then answers one request per stdin line (``{"id", "code", "device", "seed", "timeout_s"}``) with one JSON line
  carrying the same ``id``. Each request runs in a child forked from the server (torch imported, CUDA not
  initialised), in its own session, with the server's pipes closed; past ``timeout_s`` its process group is
  killed. ``--sandboxed`` (own pid namespace and private /tmp, under bubblewrap) adds a sweep after every request:
  every other process in the namespace is killed and /tmp emptied, so one task's leftovers never meet the next.
  The server is not dumpable (no ptrace, no /proc/<pid>/fd or mem for its children).

The task's own prints go to stderr. Whatever escapes a probe (the task's ``sys.exit()``, an out-of-memory error, a
failure after the forward) still becomes one failure answer with its traceback, and the process exits non-zero:
never an exit without a result.
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
import types


def _sibling(filename: str, name: str):
    """Module ``filename`` from the folder of this file, loaded by path: the child runs under ``python -I``
    (PYTHONPATH ignored), so where cuda_agent is installed with ``--target DIR`` plus PYTHONPATH (air-gapped GPU
    machines) a package import fails (it did on every task on the H200, session 18)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), filename))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _set_task_mode():
    """``model_mode.set_task_mode`` (loaded by path, see :func:`_sibling`)."""
    return _sibling("model_mode.py", "_cuda_agent_model_mode").set_task_mode


def _fail(out, kind: str, message: str) -> None:
    out.write(json.dumps({"ok": False, "kind": kind, "message": message}) + "\n")
    out.flush()


#: What task code may raise at each step: its ``sys.exit()`` is the task's failure too, not the probe's end.
_TASK_ERRORS = (Exception, SystemExit)


def _out_of_memory(exc: BaseException) -> bool:
    """An allocation failure: ``torch.OutOfMemoryError`` (= ``torch.cuda.OutOfMemoryError``), ``MemoryError``, or
    the CUDA runtime's and cuBLAS's own out-of-memory errors (raised as RuntimeError outside the allocator)."""
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", MemoryError)
    if isinstance(exc, (oom, MemoryError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("CUDA error: out of memory" in text or "CUBLAS_STATUS_ALLOC_FAILED" in text)


def _fail_current(out, kind: str, what: str) -> None:
    """The exception being handled as a failure of ``kind`` while ``what`` ran; an out-of-memory error is kind
    ``out_of_memory`` wherever it happens (the device's memory, not the task file, may be at fault)."""
    exc = sys.exc_info()[1]
    trace = traceback.format_exc(limit=6)
    if exc is not None and _out_of_memory(exc):
        return _fail(out, "out_of_memory", f"{what} ran out of memory ({type(exc).__name__}):\n{trace}")
    if isinstance(exc, SystemExit):
        return _fail(out, kind, f"{what} failed: the task called sys.exit({exc.code!r}) / raised SystemExit; a task "
                                f"must return or raise an exception, never end the process:\n{trace}")
    return _fail(out, kind, f"{what} failed:\n{trace}")


def answer(request: dict, out) -> int:
    """:func:`probe`, with anything that escapes it (the probe's own steps after the forward, a BaseException)
    written as one failure answer carrying its type and traceback; the exit status (0 only when nothing escaped)."""
    try:
        probe(request, out)
        return 0
    except BaseException as exc:  # noqa: BLE001 - this process's last word: every failure must reach the parent
        try:
            if isinstance(exc, SystemExit) or _out_of_memory(exc):
                _fail_current(out, "crash", "the probe")
            else:
                _fail(out, "crash", f"the probe stopped on an uncaught {type(exc).__name__}: {str(exc)[:500]}\n"
                                    + traceback.format_exc(limit=8))
        except BaseException:  # noqa: BLE001 - the answer pipe itself failed: the exit status still says so
            pass
        return 1


def _json_value(value, where: str):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    raise TypeError(f"{where} is a {type(value).__name__}; only numbers, bools, strings, None and lists are supported")


def _describe(value, name: str, torch) -> dict:
    if isinstance(value, torch.Tensor):
        info = {"name": name, "kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
        if value.numel() > 0 and value.dtype != torch.bool and not value.is_complex():
            v = value.detach()
            info["min"] = float(v.min().item())
            info["max"] = float(v.max().item())
            # min and max propagate NaN and hold any infinity: no tensor-sized temporary on a full device
            info["finite"] = math.isfinite(info["min"]) and math.isfinite(info["max"])
        info["nbytes"] = value.numel() * value.element_size()
        return info
    if isinstance(value, bool):
        return {"name": name, "kind": "bool", "value": value}
    if isinstance(value, int):
        return {"name": name, "kind": "int", "value": value}
    if isinstance(value, float):
        return {"name": name, "kind": "float", "value": value}
    if value is None:
        return {"name": name, "kind": "none"}
    return {"name": name, "kind": "other", "value": repr(value)[:200]}


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the task's prints go to stderr
    request = json.loads(sys.stdin.read())
    import torch  # noqa: F401 - imported before READY, so the task's time limit excludes it

    out.write("READY\n")
    out.flush()
    sys.exit(answer(request, out))


def probe(request: dict, out) -> None:
    """Run the task in ``request`` once; write one JSON line of facts (or the failure) to ``out``."""
    import torch

    device = request.get("device", "cpu")
    module = types.ModuleType("task_module")
    module.__file__ = "<task>"
    try:
        exec(compile(request["code"], "<task>", "exec"), module.__dict__)
    except _TASK_ERRORS:
        return _fail_current(out, "import_error", "executing the task module")
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not callable(getattr(module, n, None))]
    if missing:
        return _fail(
            out,
            "missing_definition",
            f"the task module does not define {', '.join(missing)}; a KernelBench task needs a class Model "
            "(torch.nn.Module), get_inputs() and get_init_inputs()",
        )
    if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
        return _fail(out, "missing_definition", "Model must be a subclass of torch.nn.Module")
    torch.manual_seed(int(request.get("seed", 0)))
    try:
        init_inputs = list(module.get_init_inputs())
        init_json = [_json_value(v, f"get_init_inputs()[{i}]") for i, v in enumerate(init_inputs)]
    except _TASK_ERRORS:
        return _fail_current(out, "init_inputs_error", "get_init_inputs()")
    rng = torch.random.get_rng_state()
    footprint = _sibling("_probe_meta.py", "_cuda_agent_probe_meta").meta_footprint(module, init_inputs, torch,
                                                                                      _TASK_ERRORS)
    torch.random.set_rng_state(rng)  # the real run sees the generator as if the meta run had not happened
    if request.get("meta_only"):  # the parent sizes the task before it lets the real run allocate
        out.write(json.dumps({"ok": True, "meta_only": True, "footprint": footprint}) + "\n")
        out.flush()
        return None
    limit = request.get("memory_limit_bytes")
    if limit and footprint.get("method") == "meta":
        # Building the model, one input set and two forwards' outputs: what this probe is about to allocate.
        need = footprint["param_bytes"] + footprint["input_bytes"] + 2 * footprint["output_bytes"]
        if need > int(limit):
            out.write(json.dumps({
                "ok": False, "kind": "too_large", "needed_bytes": need, "available_bytes": int(limit),
                "device": device, "footprint": footprint,
                "message": f"the task needs {need / 2**30:.1f} GiB on {device} for one input set (inputs "
                           f"{footprint['input_bytes'] / 2**30:.2f} GiB, outputs {footprint['output_bytes'] / 2**30:.2f}"
                           f" GiB, parameters {footprint['param_bytes'] / 2**30:.2f} GiB) but {int(limit) / 2**30:.1f} "
                           "GiB is available"}) + "\n")
            out.flush()
            return None
    hold = _sibling("_probe_device_hold.py", "_cuda_agent_probe_device_hold").DeviceHold(
        request.get("timing_lock"), float(request.get("lock_wait_s", 0.0)))
    with hold:
        return _real_run(module, init_inputs, init_json, footprint, device, hold, out, torch)


def _real_run(module, init_inputs, init_json, footprint, device, hold, out, torch) -> None:
    """The real run: the model, one input set and two forwards on ``device``, described; inside the device hold."""
    try:
        with torch.device(device):
            model = module.Model(*init_inputs)
        model = _set_task_mode()(model, torch, device)
    except _TASK_ERRORS:
        return _fail_current(out, "model_error", "Model(*get_init_inputs())")
    try:
        with torch.device(device):
            inputs = module.get_inputs()
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"get_inputs() must return a list, got {type(inputs).__name__}")
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    except _TASK_ERRORS:
        return _fail_current(out, "inputs_error", "get_inputs()")
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with torch.no_grad():
            counter = FlopCounterMode(display=False)
            with counter:
                result = model(*inputs)
            work_bytes = None
            on_cuda = str(device).startswith("cuda")
            if on_cuda:  # the forward's temporaries: what the memory planner reserves
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            again = model(*inputs)
            if on_cuda:
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated()
                kept = sum(t.numel() * t.element_size() for t in (again if isinstance(again, (list, tuple)) else [again])
                           if isinstance(t, torch.Tensor))
                work_bytes = max(0, int(peak - before - kept))
    except _TASK_ERRORS:
        return _fail_current(out, "forward_error", "Model.forward(*get_inputs())")
    outputs = list(result) if isinstance(result, (list, tuple)) else [result]
    seconds = list(again) if isinstance(again, (list, tuple)) else [again]
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        kinds = ", ".join(type(o).__name__ for o in outputs)
        return _fail(out, "forward_error", f"forward must return a Tensor or a tuple of Tensors, got: {kinds}")
    stochastic = not all(_same(a, b, torch) for a, b in zip(outputs, seconds))
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    param_bytes += sum(b.numel() * b.element_size() for b in model.buffers())
    facts = {
        "ok": True,
        "inputs": [_describe(v, f"input{i}", torch) for i, v in enumerate(inputs)],
        "outputs": [_describe(v, f"output{i}", torch) for i, v in enumerate(outputs)],
        "init_inputs": init_json,
        "flops": float(counter.get_total_flops()),
        "param_bytes": param_bytes,
        "footprint": footprint,
        "work_bytes": work_bytes,
        "stochastic": stochastic,
        "output_tuple": isinstance(result, (list, tuple)),
        "device": device,
        "torch": torch.__version__,
        "device_hold": hold.facts(),
    }
    out.write(json.dumps(facts) + "\n")
    out.flush()


def _same(a, b, torch) -> bool:
    """Equal outputs of the two forwards, NaN equal to NaN; compared in slices along the first dimension (views)
    of at most 2**26 elements, so the NaN-free copies never double an output's bytes on a full device."""
    if not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    if a.dim() == 0 or a.numel() == 0:
        return torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
    step = max(1, (2**26 * a.shape[0]) // a.numel())
    return all(torch.equal(torch.nan_to_num(a[i:i + step]), torch.nan_to_num(b[i:i + step]))
               for i in range(0, a.shape[0], step))


# --------------------------------------------------------------------------- warm server
def _not_dumpable() -> None:
    """PR_SET_DUMPABLE 0: processes of the same uid (the task children) cannot ptrace this one or open its fds."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _sweep() -> None:
    """In a private pid namespace: kill every process but this one and the namespace's init, then empty /tmp
    (a private tmpfs there), leaving mount points and the folders above them."""
    import shutil
    import signal

    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me):
            try:
                os.kill(int(name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    try:
        with open("/proc/self/mounts") as fh:
            mounts = [line.split()[1] for line in fh if len(line.split()) > 1]
    except OSError:
        mounts = []
    for entry in os.listdir("/tmp"):
        path = os.path.join("/tmp", entry)
        if any(m == path or m.startswith(path + "/") for m in mounts):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _run_forked(request: dict, out_fd: int) -> dict:
    """One request in a forked child; the server's answer (without ``id``)."""
    import select
    import signal
    import time

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the task's process
        code = 70  # EX_SOFTWARE: the child's own setup failed before the probe ran
        try:
            os.close(r)
            os.close(out_fd)  # the server's answer pipe: a task cannot write answers
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)  # nor read the next requests
            os.setsid()  # its own process group: a timeout kills everything it started
            if _THREADS:
                import torch

                torch.set_num_threads(_THREADS)
            with os.fdopen(w, "w") as result:
                code = answer(request, result)
        finally:
            os._exit(code)
    os.close(w)
    deadline = time.monotonic() + float(request.get("timeout_s", 120.0))
    chunks: list[bytes] = []
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([r], [], [], left)
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    if timed_out:
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"ok": False, "kind": "timeout"}
    text = b"".join(chunks).decode(errors="replace").strip()
    if not text:
        code = os.waitstatus_to_exitcode(status)
        return {"ok": False, "kind": "crash", "exit_code": code}
    return json.loads(text.splitlines()[0])


#: The intra-op thread count before the server's warm-up (restored in every child).
_THREADS = 0


def _warm_up() -> None:
    """Import torch and pay the probe's one-time costs once, on the CPU (CUDA stays uninitialised, so children
    can fork): the first forward under FlopCounterMode imports and registers about 2.5 s of machinery."""
    global _THREADS
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    # One thread while warming up: a started OpenMP pool does not survive fork (the children's parallel regions
    # hang); the children get the default thread count back.
    _THREADS = torch.get_num_threads()
    torch.set_num_threads(1)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad(), FlopCounterMode(display=False):
        y = torch.nn.functional.conv2d(x, torch.randn(4, 3, 3, 3))
        z = torch.nn.functional.linear(y.flatten(1), torch.randn(5, y[0].numel()))
        torch.softmax(z @ z.T, dim=-1).sum()


def serve(sandboxed: bool) -> None:
    """Answer probe requests, one per stdin line, until stdin closes."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints go to stderr
    _warm_up()
    _not_dumpable()
    out.write("READY\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            answer = _run_forked(request, out.fileno())
        except Exception:  # the server's own failure: reported, the next request still served
            answer = {"ok": False, "kind": "crash", "message": "probe server: " + traceback.format_exc(limit=4)}
        if sandboxed:
            _sweep()
        answer["id"] = request.get("id")
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    if "--serve" in sys.argv[1:]:
        serve(sandboxed="--sandboxed" in sys.argv[1:])
    else:
        main()
