"""The trusted reference process: inputs from secret seeds, reference outputs, comparison, baselines.

One process per (task, device), kept warm across requests. It runs the
reference ``Model`` from the task store (``TaskManifest.code``), never from a
workspace; it generates each input set on the device from a seed chosen by
the trusted side (``get_inputs()`` under ``with torch.device(dev)``: no
gigabyte host round trip), runs the reference FIRST on copies of the pristine
inputs, keeps expected outputs only here, exports inputs to the candidate
(raw files on CPU, CUDA IPC handles on CUDA), and compares the candidate's
outputs where they live. Candidate data is never unpickled here: CUDA IPC
arguments arrive as validated JSON and are rebuilt with trusted classes.

Parent side: :class:`ReferenceProcess` (a spawned child speaking pickle over
a pipe; both ends trusted).
"""

from __future__ import annotations

import base64
import ctypes
import inspect
import math
import os
import pickle
import socket
import subprocess
import sys
import threading
import types
from pathlib import Path
from multiprocessing.connection import Connection
from typing import Any

from cuda_agent.errors import CudaAgentError
from cuda_agent.harness import _spawner

#: Seed of the warm-up inputs (:meth:`ReferenceServer.warm_baselines`): public, never used to check a candidate.
WARM_SEED = 0


class ReferenceError_(CudaAgentError):
    """The reference process failed (bad task code, crash); the message says where."""


def load_task_module(code: str, name: str = "cuda_agent_task_reference") -> types.ModuleType:
    """Execute task source in a fresh module namespace (the trusted copy from the task store)."""
    module = types.ModuleType(name)
    module.__file__ = f"<task {name}>"
    sys.modules[name] = module
    exec(compile(code, module.__file__, "exec"), module.__dict__)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise ReferenceError_(f"task code defines no {attr!r}; a KernelBench task needs Model, get_inputs, get_init_inputs")
    return module


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    raise ReferenceError_(
        f"get_init_inputs() returned a {type(value).__name__}; only numbers, strings, bools and lists are supported"
    )


#: Environment variable: "0" when baselines are timed on the input sets' own tensors where the model leaves them
#: unchanged (``HarnessSettings.baseline_clone_inputs`` false); anything else: a clone per call.
BASELINE_CLONE_ENV = "CUDA_AGENT_BASELINE_CLONE_INPUTS"

#: Environment variable naming the reference child's end of the descriptor socket.
FD_SOCKET_ENV = "CUDA_AGENT_REFERENCE_FD_SOCKET"


class _Unreadable:
    """An exported output whose description does not fit its metadata (reported as an export error)."""

    def __init__(self, message: str) -> None:
        self.message = message


#: Exchange folders whose reusable staging slots a reference process keeps mapped (the sessions it serves at once).
SLOT_WRITERS_KEPT = 4

class ReferenceServer:
    """Everything the reference process does; lives in the trusted child (or in-process for tests)."""

    #: The child's end of the descriptor socket ('vmm' transport); set by :func:`main`, None in-process.
    fd_sock: socket.socket | None = None

    def __init__(self, code: str, device: str, init_seed: int = 42, threads: int | None = None) -> None:
        import torch

        self.torch = torch
        if threads is not None:  # before anything runs: inductor also generates code for this count
            torch.set_num_threads(threads)
        self.device = torch.device(device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.module = load_task_module(code)
        self.init_seed = init_seed
        self.init_inputs = _jsonable(list(self.module.get_init_inputs()))
        torch.manual_seed(init_seed)
        with torch.device(self.device):
            model = self.module.Model(*self.init_inputs)
        self.model = model.to(self.device).eval() if isinstance(model, torch.nn.Module) else model
        self.sets: dict[int, dict[str, Any]] = {}
        self.compiled: Any = None
        self._mutation: dict[str, bool] = {}  # baseline kind -> writes to its inputs (:meth:`_mutates_inputs`)
        self.host_stats: dict[str, dict[str, float]] = {}  # baseline kind -> :meth:`baseline_host_stats`
        self._slot_writers: dict[str, Any] = {}  # exchange folder -> SlotWriter of fresh sets (:meth:`stage_set`)
        self._verified_direct: set[str] = set()  # kinds whose first batch on the sets' own tensors was checked
        self.timer: Any = None
        self.reader: Any = None  # DeviceReader of outputs staged by candidates (CUDA)
        self._vmm_driver: Any = None  # driver calls of the 'vmm' transport (made on first use)
        self._fd_exports: dict[int, list[int]] = {}  # set -> device allocations it was exported in (stage_fds)
        self.baseline_bytes: int | None = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.baseline_bytes = torch.cuda.memory_allocated(self.device)

    def threads(self) -> int:
        """torch's intra-op thread count in this process (the baselines run with it)."""
        return int(self.torch.get_num_threads())

    # ------------------------------------------------------------------ inputs and expected outputs
    def make_set(
        self, k: int, seed: int, exchange: str | None, transport: str = "ipc", stage: bool = True
    ) -> dict[str, Any]:
        """Generate input set ``k`` from ``seed``, run the reference on copies, hand the inputs over.

        ``stage=False``: the candidate generates the set itself from the same seed (``input_transport:
        seeded``); only descriptions and fingerprints go back, and :meth:`stage_set` hands the set over
        later if the candidate's copy does not match.
        """
        torch = self.torch
        from cuda_agent.harness.compare import fingerprint

        pristine = generate_inputs(torch, self.module.get_inputs, seed, self.device)
        with torch.no_grad():
            out = self.model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in pristine])
        expected = list(out) if isinstance(out, (tuple, list)) else [out]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.sets[k] = {
            "seed": seed,
            "inputs": pristine,
            "expected": [e.detach() if isinstance(e, torch.Tensor) else e for e in expected],
            "fingerprints": [fingerprint(x) if isinstance(x, torch.Tensor) else None for x in pristine],
        }
        return {
            "set": k,
            "tensors": self._describe(k, exchange, transport, stage),
            "input_fingerprints": self.sets[k]["fingerprints"],
            "outputs": [
                {"dtype": str(e.dtype).removeprefix("torch."), "shape": list(e.shape)}
                if isinstance(e, torch.Tensor)
                else {"kind": type(e).__name__}
                for e in self.sets[k]["expected"]
            ],
            "input_bytes": sum(x.numel() * x.element_size() for x in pristine if isinstance(x, torch.Tensor)),
        }

    def stage_set(self, k: int, exchange: str | None, transport: str = "ipc", reuse: bool = False) -> list[dict[str, Any]]:
        """Hand input set ``k`` over after all (a seeded copy did not match, or a fresh set at its call): its tensor
        descriptions. ``reuse``: staged files, where used, are the exchange folder's reusable ``fresh_<i>.bin``
        slots (rewritten in place: no page allocation per set), so the set must be read before the next one is
        staged there."""
        return self._describe(k, exchange, transport, stage=True, reuse=reuse)

    def stage_fds(self, k: int, vmm: bool = False) -> dict[str, Any]:
        """Stage input set ``k`` where nothing can see it until it is handed over: one memory file per tensor
        (``memfd``), or with ``vmm`` on CUDA one exportable device allocation per tensor (a device-to-device copy;
        a driver failure falls back to memory files, its reason in ``vmm_error``). The descriptors go to the
        parent over the descriptor socket, in input order, before this answer; ours are closed. Device allocations
        are released with the set (:meth:`drop_sets`).

        Returns ``{"tensors": descriptions (``fd``: index into the descriptors), "fds": count, "vmm_error"}``."""
        from cuda_agent.harness._staging import _raw_bytes, write_memfd
        from cuda_agent.harness._vmm import VmmError, close_fds, export_copy, send_fds

        if self.fd_sock is None:
            raise ValueError("this reference server has no descriptor socket (in-process)")
        torch = self.torch
        descs = self._describe(k, None, "host", stage=False)
        fds: list[int] = []
        vmm_error: str | None = None
        handles = self._fd_exports.setdefault(k, [])
        try:
            for d, x in zip(descs, self.sets[k]["inputs"]):
                if not isinstance(x, torch.Tensor):
                    continue
                raw = _raw_bytes(x)
                d["fd"], d["nbytes"] = len(fds), int(raw.numel())
                if vmm and vmm_error is None and x.device.type == "cuda" and raw.numel():
                    try:
                        exported = export_copy(torch, self._driver(), raw)
                    except VmmError as exc:
                        vmm_error = str(exc)[:500]
                    else:
                        handles.append(exported["handle"])
                        fds.append(exported["fd"])
                        d.update(vmm=True, alloc=exported["alloc"])
                        continue
                fd, _ = write_memfd(raw, f"fresh-{k}-{d['fd']}")
                fds.append(fd)
            send_fds(self.fd_sock, fds)
        finally:
            close_fds(fds)
        return {"tensors": descs, "fds": len(fds), "vmm_error": vmm_error}

    def _driver(self) -> Any:
        """The driver calls of the 'vmm' transport on this process's device (made on first use)."""
        if self._vmm_driver is None:
            from cuda_agent.harness._vmm import driver_for

            self._vmm_driver = driver_for(self.torch, self.device)
        return self._vmm_driver

    def _slot_writer(self, exchange: str) -> Any:
        """The reusable staging slots of ``exchange`` (the few most recent folders' are kept mapped)."""
        from cuda_agent.harness._staging import SlotWriter

        writer = self._slot_writers.pop(exchange, None) or SlotWriter(Path(exchange))
        self._slot_writers[exchange] = writer  # most recent last
        while len(self._slot_writers) > SLOT_WRITERS_KEPT:
            self._slot_writers.pop(next(iter(self._slot_writers)))
        return writer

    def _describe(self, k: int, exchange: str | None, transport: str, stage: bool,
                  reuse: bool = False) -> list[dict[str, Any]]:
        """Descriptions of set ``k``'s inputs: values inline; tensors by CUDA IPC handle, staged file (``reuse``:
        a reusable slot file), or (``stage=False``) layout only."""
        torch = self.torch
        descs: list[dict[str, Any]] = []
        for i, x in enumerate(self.sets[k]["inputs"]):
            if not isinstance(x, torch.Tensor):
                descs.append({"kind": "value", "value": _jsonable(x)})
                continue
            d: dict[str, Any] = {
                "kind": "tensor",
                "dtype": str(x.dtype).removeprefix("torch."),
                "shape": list(x.shape),
                "stride": list(x.stride()),
            }
            if not stage:
                pass
            elif self.device.type == "cuda" and transport == "ipc":
                from torch.multiprocessing.reductions import reduce_tensor

                _, args = reduce_tensor(x)
                d["ipc"] = base64.b64encode(pickle.dumps(args)).decode()
            else:  # CPU, or CUDA staged through the host ('host' transport: the candidate copies it to its GPU)
                assert exchange is not None
                if reuse:
                    path = self._slot_writer(exchange).write(f"fresh_{i}.bin", x)
                else:
                    path = Path(exchange) / f"in_{k}_{i}.bin"
                    from cuda_agent.harness._staging import write_tensor_file

                    write_tensor_file(path, x)
                d["file"] = str(path)
            descs.append(d)
        return descs

    def drop_sets(self, ks: list[int]) -> int:
        """Free input sets no longer needed; returns device bytes still allocated beyond the model (leak probe)."""
        for k in ks:
            self.sets.pop(k, None)
            for handle in self._fd_exports.pop(k, []):
                self._vmm_driver.release(handle)
        if self.device.type != "cuda":
            return 0
        torch = self.torch
        torch.cuda.ipc_collect()  # free blocks whose IPC consumers released them
        if self.baseline_bytes is None:
            self.baseline_bytes = torch.cuda.memory_allocated(self.device)
        return max(0, torch.cuda.memory_allocated(self.device) - self.baseline_bytes)

    def inputs_intact(self) -> list[int]:
        """Sets whose pristine inputs changed since they were made (a candidate wrote through IPC, T5)."""
        from cuda_agent.harness.compare import fingerprint

        torch = self.torch
        return [
            k
            for k, s in self.sets.items()
            if [fingerprint(x) if isinstance(x, torch.Tensor) else None for x in s["inputs"]] != s["fingerprints"]
        ]

    # ------------------------------------------------------------------ comparison
    def check(self, k: int, exports: list[dict[str, Any] | None], metas: list[dict[str, Any]], atol_rtol: dict[str, Any]) -> dict[str, Any]:
        """Compare the candidate's exported outputs of a call on set ``k`` with the expected ones."""
        from cuda_agent.harness.compare import compare_output, fingerprint

        torch = self.torch
        expected = self.sets[k]["expected"]
        errors: list[dict[str, Any]] = []
        violations: list[dict[str, Any]] = []
        n_vmm = sum(1 for d in exports if isinstance(d, dict) and d.get("vmm"))
        fds: list[int] = []
        if n_vmm:
            from cuda_agent.harness._vmm import close_fds, recv_fds

            if self.fd_sock is None:
                return {"errors": [], "violations": [], "transport_failed": "no descriptor socket"}
            try:
                fds = recv_fds(self.fd_sock, n_vmm, 5.0)  # relayed before the request: already queued
            except ValueError as exc:
                return {"errors": [], "violations": [], "transport_failed": str(exc)}
        try:
            opened = self._open_vmm(exports, metas, fds) if fds else {}
        except Exception as exc:  # noqa: BLE001 - the driver refused: the caller falls back to files
            return {"errors": [], "violations": [], "transport_failed": f"{type(exc).__name__}: {exc}"[:500]}
        finally:
            if fds:
                close_fds(fds)
        for i, (e, desc, meta) in enumerate(zip(expected, exports, metas)):
            if desc is None:
                continue
            try:
                actual = opened.pop(i) if i in opened else self._open_output(desc, meta)
                if isinstance(actual, _Unreadable):
                    raise ValueError(actual.message)
            except Exception as exc:  # noqa: BLE001 - malformed candidate data
                errors.append({"check": "export", "message": f"output {i}: could not read it: {exc}", "input_set": k, "output": i})
                continue
            if meta.get("fingerprint") and fingerprint(actual) != meta["fingerprint"]:
                violations.append(
                    {
                        "rule": "T10.runtime.output_changed",
                        "message": f"output {i} changed after forward returned (work still running in the background?)",
                    }
                )
            atol, rtol = atol_rtol.get(str(e.dtype).removeprefix("torch."), atol_rtol["*"])
            for err in compare_output(e, actual, atol=atol, rtol=rtol, input_set=k, index=i):
                errors.append(err.model_dump(mode="json"))
            del actual
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return {"errors": errors, "violations": violations}

    def _open_vmm(self, exports: list[Any], metas: list[dict[str, Any]], fds: list[int]) -> dict[int, Any]:
        """The 'vmm' outputs, copied into this process's memory, by output position.

        Driver failures raise (the transport does not work here); a description that does not fit its metadata
        gives a ValueError stored for that output (reported as an export error of the candidate).
        """
        from cuda_agent.harness._vmm import import_copy

        torch = self.torch
        driver = self._driver()
        out: dict[int, Any] = {}
        j = 0
        for i, (desc, meta) in enumerate(zip(exports, metas)):
            if not (isinstance(desc, dict) and desc.get("vmm")):
                continue
            fd = fds[j]
            j += 1
            dtype = getattr(torch, str(meta.get("dtype")), None)
            if not isinstance(dtype, torch.dtype):
                out[i] = _Unreadable(f"unknown dtype {meta.get('dtype')!r}")
                continue
            shape = [int(x) for x in meta.get("shape", [])]
            want = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
            nbytes, alloc = int(desc.get("nbytes", -1)), int(desc.get("alloc", -1))
            if nbytes != want:
                out[i] = _Unreadable(f"buffer holds {nbytes} bytes, shape {shape} of {dtype} needs {want}")
                continue
            raw = import_copy(torch, driver, fd, nbytes, alloc, self.device)
            out[i] = (raw.view(torch.bool) if dtype == torch.bool else raw.view(dtype)).view(shape)
        return out

    def _open_output(self, desc: dict[str, Any], meta: dict[str, Any]) -> Any:
        torch = self.torch
        dtype = getattr(torch, str(meta["dtype"]))
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {meta['dtype']!r}")
        shape = [int(s) for s in meta["shape"]]
        if "file" in desc:
            if self.device.type == "cuda":  # compared where the expected output lives
                if self.reader is None:
                    from cuda_agent.harness._staging import DeviceReader

                    self.reader = DeviceReader(self.device)
                return self.reader.read(Path(str(desc["file"])), shape, dtype)
            from cuda_agent.harness._staging import read_tensor_file

            return read_tensor_file(Path(str(desc["file"])), shape, dtype)
        return _rebuild_ipc_tensor(desc["ipc"], dtype)

    # ------------------------------------------------------------------ baselines
    def _baseline_fn(self, which: str, compile_mode: str) -> Any:
        """The eager model, or its ``torch.compile`` wrapper (made once per process)."""
        if which == "compile":
            if self.compiled is None:
                self.compiled = self.torch.compile(self.model, mode=None if compile_mode == "default" else compile_mode)
            return self.compiled
        return self.model

    def _untimed_calls(self, whiches: tuple[str, ...], compile_mode: str, inputs: list[Any]) -> bool:
        """One untimed forward per baseline kind on copies of ``inputs`` (torch.compile compiles on its first);
        returns True when this call compiled."""
        torch = self.torch
        first = "compile" in whiches and self.compiled is None
        with torch.no_grad():
            for which in whiches:
                self._baseline_fn(which, compile_mode)(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return first

    def prepare_baseline(self, which: str, k: int, compile_mode: str) -> bool:
        """One untimed call on set ``k`` so that ``torch.compile`` compiles now, outside any timing lock.

        Returns True when this call compiled (the first compile-baseline call of the process).
        """
        return self._untimed_calls((which,), compile_mode, self.sets[k]["inputs"])

    def warm_baselines(self, compile_mode: str, with_compile: bool) -> bool:
        """Run the eager (and compiled) reference once on inputs from a public seed: imports, CUDA kernels and
        ``torch.compile``'s compilation happen now, before any timing lock or device slot is held.

        Nothing of it is kept but the compiled module. Returns True when this call compiled.
        """
        inputs = generate_inputs(self.torch, self.module.get_inputs, WARM_SEED, self.device)
        return self._untimed_calls(("eager", "compile") if with_compile else ("eager",), compile_mode, inputs)

    def time_baseline(self, which: str, sets: list[int], n_calls: int, warmup: int, compile_mode: str) -> list[float]:
        """Per-call ms of the eager or compiled reference over rotated sets, same protocol as the candidate."""
        torch = self.torch
        from cuda_agent.harness.timing import (NET_ENV, DeviceTimer, add_host_stats, calibrated_overhead, empty_host_stats,
                                               net_of_overhead)

        net = os.environ.get(NET_ENV) == "1"  # set by ReferenceProcess from the harness settings
        if self.timer is None:
            self.timer = DeviceTimer(str(self.device))
        if net and self.timer.overhead_ms is None:
            calibrated_overhead(self.timer)  # the caller holds the device's timing lock while baselines are timed
        fn = self._baseline_fn(which, compile_mode)
        clone = os.environ.get(BASELINE_CLONE_ENV) != "0" or self._mutates_inputs(which, fn, sets[0])
        samples: list[float] = []
        self.timer.take_host_stats()
        with torch.no_grad():
            for j in range(warmup + n_calls):
                s = self.sets[sets[j % len(sets)]]
                args = [x.clone() if clone and isinstance(x, torch.Tensor) else x for x in s["inputs"]]
                _, ms, _ = self.timer.time_call(lambda: fn(*args), warm=args)
                if j >= warmup:
                    samples.append(net_of_overhead(ms, self.timer.overhead_ms) if net else ms)
        if not clone and which not in self._verified_direct:
            self._verified_direct.add(which)
            self._restore_if_written(which, sets)
        add_host_stats(self.host_stats.setdefault(which, empty_host_stats()), self.timer.take_host_stats())
        return samples

    def _restore_if_written(self, which: str, sets: list[int]) -> None:
        """After the first batch timed on the sets' own tensors: any set whose inputs no longer match their
        fingerprints (a model that writes to its inputs only on some data) is made again from its seed, and that
        baseline kind is timed on clones from then on."""
        from cuda_agent.harness.compare import fingerprint

        torch = self.torch
        for k in dict.fromkeys(sets):
            s = self.sets.get(k, {})
            if "fingerprints" not in s:
                continue  # a diagnostics set (harness/_timing_variants.py): nothing to compare with
            now = [fingerprint(x) if isinstance(x, torch.Tensor) else None for x in s["inputs"]]
            if now != s["fingerprints"]:
                self._mutation[which] = True
                s["inputs"] = generate_inputs(torch, self.module.get_inputs, s["seed"], self.device)

    def baseline_host_stats(self) -> dict[str, dict[str, float]]:
        """Per baseline kind, over every :meth:`time_baseline` call of this process (warm-ups included): timed
        calls, those whose host enqueue outlasted the pre-roll spin, the longest enqueue (ms); CUDA only
        (:attr:`DeviceTimer.host_stats`)."""
        return {k: dict(v) for k, v in self.host_stats.items()}

    def timing_variants(self, sets: list[int] | None = None, calls: int = 100, placements: int = 3,
                        which: str = "eager") -> dict[str, Any]:
        """Diagnostics: the eager baseline timed under variants of the protocol in this process
        (:mod:`cuda_agent.harness._timing_variants`); the caller holds the device's timing lock."""
        from cuda_agent.harness._timing_variants import timing_variants

        return timing_variants(self, sets, calls, placements, which)

    def _mutates_inputs(self, which: str, fn: Any, k: int) -> bool:
        """Whether the eager/compiled reference writes to its inputs: one call on clones of set ``k``, compared
        bit for bit with the originals (cached per kind; a model that does is timed on clones per call)."""
        cache = self._mutation
        if which not in cache:
            torch = self.torch
            pristine = self.sets[k]["inputs"]
            copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in pristine]
            with torch.no_grad():
                fn(*copies)
            cache[which] = any(isinstance(x, torch.Tensor) and not torch.equal(x, c) for x, c in zip(pristine, copies))
        return cache[which]

    def profiler_sum(self, which: str, k: int, compile_mode: str) -> float:
        """The release's profiler-sum time of the eager/compiled reference on set ``k``."""
        torch = self.torch
        from cuda_agent.harness.timing import profiler_sum_ms

        fn = self._baseline_fn(which, compile_mode)
        args = [x.clone() if isinstance(x, torch.Tensor) else x for x in self.sets[k]["inputs"]]
        with torch.no_grad():
            return profiler_sum_ms(lambda: fn(*args), str(self.device))


def _rebuild_ipc_tensor(encoded: Any, dtype: Any) -> Any:
    """Rebuild a CUDA tensor from the candidate's JSON-encoded IPC arguments, with trusted classes only."""
    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    params = list(inspect.signature(rebuild_cuda_tensor).parameters)
    if not isinstance(encoded, list) or len(encoded) != len(params):
        raise ValueError(f"IPC description must have {len(params)} fields")
    values: dict[str, Any] = {}
    for name, raw in zip(params, encoded):
        if isinstance(raw, dict) and set(raw) == {"b64"}:
            values[name] = base64.b64decode(raw["b64"])
        elif isinstance(raw, list) and all(isinstance(x, int) for x in raw):
            values[name] = tuple(raw)
        elif isinstance(raw, (bool, int)) or raw is None:
            values[name] = raw
        elif isinstance(raw, dict) and "repr" in raw:
            values[name] = None
        else:
            raise ValueError(f"IPC field {name!r} has an unexpected value")
    values["tensor_cls"] = torch.Tensor
    values["storage_cls"] = torch.storage.TypedStorage  # what reduce_tensor sends; has _release_ipc_counter
    values["dtype"] = dtype
    values["requires_grad"] = False
    values["tensor_size"] = torch.Size(values["tensor_size"])
    return rebuild_cuda_tensor(**values)


def _make_undumpable() -> None:
    """PR_SET_DUMPABLE=0: other processes of the same user cannot ptrace or read our memory."""
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass


def _serve(conn: Any, code: str, device: str, init_seed: int, threads: int | None = None) -> None:
    """Child main loop: (method, args, kwargs) in, ('ok', value) | ('err', message) out."""
    _make_undumpable()
    try:
        server = ReferenceServer(code, device, init_seed, threads)
        conn.send(("ok", {"init_inputs": server.init_inputs}))
    except BaseException as exc:  # noqa: BLE001
        import traceback

        conn.send(("err", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        method, args, kwargs = msg
        try:
            conn.send(("ok", getattr(server, method)(*args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001
            import traceback

            conn.send(("err", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"))


def generate_inputs(torch: Any, get_inputs: Any, seed: int, device: Any) -> list[Any]:
    """One input set: ``get_inputs()`` under ``manual_seed(seed)`` with ``device`` as the default device.

    The reference process and, for ``input_transport: seeded``, the candidate runner (before the candidate's
    code is imported) both call this, so the same seed gives the same tensors on the same device and torch;
    the trusted side compares fingerprints and hands over any set that differs.
    """
    torch.manual_seed(seed)
    with torch.device(device):
        raw = list(get_inputs())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]


class _PipePair:
    """A duplex pickle channel over two one-way pipe fds (both ends trusted)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._r = Connection(read_fd, writable=False)
        self._w = Connection(write_fd, readable=False)

    def send(self, obj: Any) -> None:
        self._w.send(obj)

    def recv(self) -> Any:
        return self._r.recv()

    def poll(self, timeout: float) -> bool:
        return self._r.poll(timeout)

    def close(self) -> None:
        self._r.close()
        self._w.close()


#: Environment variable: "compile" makes a reference child import torch.compile's machinery (dynamo, inductor)
#: before its task arrives, beside torch itself (always imported first).
PREIMPORT_ENV = "CUDA_AGENT_REFERENCE_PREIMPORT"


def main() -> int:
    """Entry point of the reference child (``python -m cuda_agent.harness.reference``).

    Imports torch (and, asked to, torch.compile's machinery) before it reads its task: a process started ahead
    of time (the evaluator's spare reference processes) has those seconds behind it when a task arrives. CUDA is
    initialised only once the task names its device. A stop request instead of a task ends it.
    """
    read_fd, write_fd = (int(x) for x in os.environ["CUDA_AGENT_REFERENCE_FDS"].split(","))
    conn = _PipePair(read_fd, write_fd)
    fd = os.environ.get(FD_SOCKET_ENV)
    ReferenceServer.fd_sock = socket.socket(fileno=int(fd)) if fd else None
    import torch  # noqa: F401 - imported ahead of the task

    if os.environ.get(PREIMPORT_ENV) == "compile":
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    try:
        first = conn.recv()
    except EOFError:
        return 0
    if first is None:  # a spare closed before it got a task
        return 0
    code, device, init_seed, threads = first
    _serve(conn, code, device, init_seed, threads)
    return 0


class ReferenceProcess:
    """Parent-side handle of a warm reference process for one task on one device.

    Started with ``Popen`` (fork+exec of a fresh interpreter, never a fork of a
    process that touched CUDA, and no re-import of the caller's main module).
    Given ``code=None`` it is a spare: started now, importing torch, and given its
    task later by :meth:`start`.
    """

    def __init__(
        self, code: str | None, device: str, init_seed: int = 42, start_timeout_s: float = 300.0,
        threads: int | None = None, preroll_us: float = 0.0, compile_threads: int | None = None,
        net_overhead: bool = False, preimport_compile: bool = False, cpus: frozenset[int] | None = None,
        flush_multiple: float = 2.0, warm_pages: bool = False, clone_inputs: bool = True, preroll_retakes: int = 0,
        preroll_max_us: float = 5000.0,
    ) -> None:
        """:param code: the task's source; None for a spare (see :meth:`start`).
        :param threads: intra-op/OpenMP threads of the child (the candidate's count); None = torch's default.
        :param preimport_compile: import torch.compile's machinery before the task arrives (baselines compile).
        :param preroll_us: the timer's pre-call GPU spin (``HarnessSettings.timing_preroll_us``), as the candidate's.
        :param net_overhead: baselines are timed net of the protocol's per-process cost (``timing_net_overhead``).
        :param compile_threads: inductor compile workers of the child (``HarnessSettings.reference_compile_threads``);
            None = inductor's default.
        :param cpus: the cores the child starts on (``HarnessSettings.timing_cpus``); None = this process's.
        :param flush_multiple: the timer's L2 flush size in L2 multiples (``HarnessSettings.timing_l2_flush_multiple``),
            as the candidate's.
        :param warm_pages: warm the inputs' pages after each flush (``HarnessSettings.timing_warm_input_pages``), as
            the candidate's.
        :param clone_inputs: baselines on a clone of the inputs per call (``HarnessSettings.baseline_clone_inputs``).
        :param preroll_retakes: / :param preroll_max_us: retakes of a call whose host side outlasted the spin, and the
            longest spin they use (``HarnessSettings.timing_preroll_retakes`` / ``timing_preroll_max_us``), as the
            candidate's.
        """
        self.device = device
        #: The baselines were warmed (:meth:`ReferenceServer.warm_baselines`) in this process.
        self.warmed = False
        #: Sessions using this process now (the evaluator never closes one in use to make room).
        self.users = 0
        #: Taken out of service (device memory stayed pinned): closed when its last session ends.
        self.retired = False
        self._stop_requested = False
        self._call_lock = threading.RLock()  # one request at a time on the pipe, whatever thread asks
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Descriptors of the candidate's exported device buffers ('vmm' transport) are relayed over this socket.
        self._fd_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ, CUDA_AGENT_REFERENCE_FDS=f"{to_child_r},{from_child_w}")
        env[FD_SOCKET_ENV] = str(child_sock.fileno())
        if threads is not None:
            env["OMP_NUM_THREADS"] = str(threads)
        from cuda_agent.harness.timing import NET_ENV, protocol_env

        # the candidate runner's, see sandbox.py
        env.update(protocol_env(preroll_us, flush_multiple, warm_pages, preroll_retakes, preroll_max_us))
        env[BASELINE_CLONE_ENV] = "1" if clone_inputs else "0"
        env[NET_ENV] = "1" if net_overhead else "0"
        if compile_threads is not None:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = str(compile_threads)
        env[PREIMPORT_ENV] = "compile" if preimport_compile else ""
        self._threads = threads
        self.info: Any = None
        self.proc = _spawner.popen(  # a long-lived process: forked by the spawner thread (harness/_spawner.py)
            [sys.executable, "-m", "cuda_agent.harness.reference"],
            pass_fds=(to_child_r, from_child_w, child_sock.fileno()),
            env=env,
            stdin=subprocess.DEVNULL,
            cpus=cpus,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        child_sock.close()
        self._conn = _PipePair(from_child_r, to_child_w)
        if code is not None:
            self.start(code, init_seed, start_timeout_s)

    @property
    def started(self) -> bool:
        """The child has its task (a spare has not, until :meth:`start`)."""
        return self.info is not None

    def start(self, code: str, init_seed: int = 42, start_timeout_s: float = 300.0) -> None:
        """Give the child its task and wait until it has built the model (raises :class:`ReferenceError_`)."""
        if self.started:
            raise ReferenceError_("this reference process already has a task")
        try:
            self._conn.send((code, self.device, init_seed, self._threads))
        except OSError as exc:
            self.close()
            raise ReferenceError_(f"reference process is gone before its task: {exc}") from exc
        self.info = self._recv(start_timeout_s)

    def _recv(self, timeout_s: float) -> Any:
        if not self._conn.poll(timeout_s):
            self.close()
            raise ReferenceError_(f"reference process did not answer within {timeout_s:.0f} s")
        try:
            status, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            code = self.proc.poll()
            self.close()
            raise ReferenceError_(f"reference process died (exit code {code})") from exc
        if status == "err":
            raise ReferenceError_(f"reference process: {value}")
        return value

    def call(self, method: str, *args: Any, timeout_s: float = 600.0, pass_fds: list[int] | tuple[int, ...] = (), **kwargs: Any) -> Any:
        """Run ``ReferenceServer.<method>`` in the child and return its result.

        ``pass_fds``: descriptors to hand over with the request (the child receives copies; ours stay open).
        """
        with self._call_lock:
            if not self.alive:
                raise ReferenceError_("reference process is not running")
            try:
                if pass_fds:
                    from cuda_agent.harness._vmm import send_fds

                    send_fds(self._fd_sock, list(pass_fds))
                self._conn.send((method, args, kwargs))
            except OSError as exc:
                raise ReferenceError_(f"reference process is gone: {exc}") from exc
            return self._recv(timeout_s)

    def call_with_fds(self, method: str, *args: Any, timeout_s: float = 600.0, **kwargs: Any) -> tuple[Any, list[int]]:
        """:meth:`call` for a method that answers with descriptors (its result's ``fds`` counts them; the child sends
        them over the descriptor socket before it answers): (result, the descriptors, ours to close)."""
        from cuda_agent.harness._vmm import recv_fds

        with self._call_lock:
            value = self.call(method, *args, timeout_s=timeout_s, **kwargs)
            try:
                return value, recv_fds(self._fd_sock, int(value.get("fds", 0)), 5.0)
            except ValueError as exc:
                raise ReferenceError_(f"{method}: {exc}") from exc

    @property
    def alive(self) -> bool:
        """The child is running."""
        return self.proc.poll() is None

    def request_stop(self) -> None:
        """Ask the child to exit, without waiting (:meth:`close` waits). Idempotent."""
        if self._stop_requested or self.proc.poll() is not None:
            return
        self._stop_requested = True
        try:
            self._conn.send(None)
        except Exception:  # noqa: BLE001 - a child that cannot hear it is killed by close()
            pass

    def close(self) -> None:
        """Stop the child: ask it to exit, wait up to 5 s, then kill it."""
        self.request_stop()
        if self.proc.poll() is None:
            try:
                self.proc.wait(5)
            except Exception:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        try:
            self._conn.close()
        except OSError:
            pass
        self._fd_sock.close()


def close_all(refs: list[ReferenceProcess]) -> None:
    """Close several reference processes at once: each is asked to exit before any is waited for, so the whole
    takes about one process's exit (CUDA context teardown, about a second each on the H200) instead of the sum
    (16 warm processes closed one by one took 20 s at the end of an eval run)."""
    for ref in refs:
        ref.request_stop()
    for ref in refs:
        ref.close()


if __name__ == "__main__":
    sys.exit(main())
