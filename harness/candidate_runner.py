"""The program that runs INSIDE the sandbox: loads the candidate and runs its forward.

Started ahead of time (``python -m cuda_agent.harness.candidate_runner``),
it imports torch, initialises the device, warms the thread pools, takes the
integrity guard snapshot, says ``ready``, and then serves requests of one
evaluation before it is killed. Nothing here decides a verdict: it reports
what happened; the trusted side compares and times.

Channel: JSON lines on two inherited pipe fds (``CUDA_AGENT_RUNNER_FDS=in,out``);
the candidate's own stdout/stderr go to a separate pipe the parent drains.
Messages from here are untrusted by the parent (JSON only, never pickle).

Requests (``op``):
- ``load``: workspace, so_dir, device, init_inputs, init_seed, output specs (for NaN poisoning).
- ``inputs``: one input set (raw files in the exchange folder, copied to the device here; or, with the 'ipc'
  transport on CUDA, IPC handles; or, for a fresh set handed over at its call, memory files or device allocations
  whose descriptors came over ``CUDA_AGENT_FD_SOCKET`` just before the request) kept pristine here. A set whose
  descriptors could not be read is answered ``fd_error`` (the trusted side hands it over through files instead).
- ``call``: copy an input set, poison output-sized memory with NaN, flush caches, time one forward,
  describe the outputs (type, dtype, shape, aliasing, fingerprint) and re-fingerprint the inputs.
- ``export``: hand the last outputs over (raw files; CUDA with the 'ipc' transport: IPC handles; with 'vmm': device
  buffers whose file descriptors go over the socket ``CUDA_AGENT_FD_SOCKET``); the parent then stops this process
  before the trusted side reads them.
- ``guard``: compare the integrity guard snapshot taken before load with now.
- ``calibrate`` (before ``load`` only): the timing protocol's own cost per call, null calls timed the same way.
- ``exit``.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# Captured before any candidate code runs: patching the module attributes later has no effect here.
_perf_counter = time.perf_counter
_json_dumps = json.dumps


def _encode(obj: Any) -> Any:
    """JSON-safe form of IPC reduction arguments (bytes -> {'b64': ...})."""
    if isinstance(obj, bytes):
        return {"b64": base64.b64encode(obj).decode()}
    if isinstance(obj, (list, tuple)):
        return [_encode(x) for x in obj]
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    return {"repr": str(obj)}


class _Runner:
    """State of one candidate process."""

    def __init__(self, out_fd: int) -> None:
        import torch

        self.torch = torch
        self.out = os.fdopen(out_fd, "w", buffering=1)
        self.device = "cpu"
        self.inputs: dict[int, list[Any]] = {}
        self._slots: Any = None  # SlotWriter of exported outputs (files in the exchange folder)
        self._vmm: Any = None  # VmmExporter of exported outputs ('vmm' transport)
        self._vmm_error: str | None = None
        from cuda_agent.harness._vmm import FD_SOCKET_ENV

        fd = os.environ.get(FD_SOCKET_ENV)
        self.fd_sock = socket.socket(fileno=int(fd)) if fd else None  # descriptors to the trusted side
        self._reader: Any = None  # DeviceReader of staged inputs (CUDA)
        self._vmm_driver: Any = None  # driver calls of inputs handed over as device allocations (made on first use)
        self.staging: dict[int, Any] = {}
        self.so_path: Path | None = None
        self.model: Any = None
        self.last: list[Any] = []
        self.output_specs: list[dict[str, Any]] = []
        self.exchange: Path | None = None
        self.guard_before: dict[str, Any] | None = None
        self.timer: Any = None
        self.runtime: Any = None

    # ------------------------------------------------------------------ channel
    def send(self, **msg: Any) -> None:
        self.out.write(_json_dumps(msg) + "\n")
        self.out.flush()

    # ------------------------------------------------------------------ startup
    def start(self, device: str) -> None:
        """Import-time work done before the candidate exists: device init, pool warm-up, guard snapshot."""
        torch = self.torch
        self.device = device
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))
            torch.ones(1, device=device).add_(1)
            torch.cuda.synchronize()
        # Create intra-op/OpenMP worker threads now, so the thread count is stable before load.
        x = torch.ones(1 << 16)
        (x * 2).sum()
        from cuda_agent.harness.timing import DeviceTimer

        # Never a retake of the candidate's call: it would run again on the same data (HarnessSettings.
        # timing_preroll_retakes); a guarded part of the timer's state, so the candidate cannot switch it on.
        self.timer = DeviceTimer(device, preroll_retakes=0)
        try:
            from cuda_agent.harness.integrity import runtime  # type: ignore[attr-defined]

            self.runtime = runtime
        except Exception:
            from cuda_agent.harness import _guard_fallback as runtime  # noqa: N813

            self.runtime = runtime
        with self.runtime.audit_ops():  # lazy imports of the audit happen before the snapshot
            (x + 1).sum()
        self.guard_before = self.runtime.take_guard_snapshot()
        self.timer_before = self.timer.state()

    def _guard_violations(self) -> list[Any]:
        """The integrity guard's violations since the snapshot, plus any change to this runner's timer itself (an
        instance attribute shadowing a method, another flush buffer or spin: T8), which the guard's identities of
        module and class attributes cannot see."""
        from cuda_agent.harness.timing import timer_state_changes

        out = list(self.runtime.compare_guard_snapshot(self.guard_before, self.runtime.take_guard_snapshot()))
        changes = timer_state_changes(self.timer_before, self.timer.state())
        if changes:
            out.append({"rule": "T8.runtime.timer_patched", "file": None, "line": None,
                        "message": "the harness's timer was changed after the candidate loaded: " + "; ".join(changes[:6])
                                   + "; the timer must stay untouched"})
        return out

    # ------------------------------------------------------------------ requests
    def op_load(self, req: dict[str, Any]) -> None:
        torch = self.torch
        self.exchange = Path(req["exchange"]) if req.get("exchange") else None
        self.output_specs = req.get("output_specs", [])
        seeded = self._generate_seeded_sets(req.get("task_code"), req.get("seeded_sets") or {})
        sys.path.insert(0, str(req["so_dir"]))
        self.so_path = next(iter(sorted(Path(req["so_dir"]).glob("cuda_extension*.so"))), None)
        sys.path.insert(1, str(req["workspace"]))
        try:
            import cuda_extension  # noqa: F401  (the candidate's binary, built by the harness)
        except Exception as exc:
            if req.get("require_extension", True):
                raise RuntimeError(f"importing cuda_extension from {req['so_dir']} failed: {exc}") from exc
        path = Path(req["workspace"]) / req.get("module", "model_new.py")
        spec = importlib.util.spec_from_file_location("model_new", path)
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["model_new"] = module
        spec.loader.exec_module(module)
        cls = getattr(module, "ModelNew", None)
        if cls is None:
            raise RuntimeError(f"{path.name} defines no class ModelNew")
        torch.manual_seed(int(req.get("init_seed", 42)))
        with torch.device(self.device):
            model = cls(*req.get("init_inputs", []))
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device)
        self.model = model
        violations = self._guard_violations()
        self.send(ok=True, violations=[_violation_dict(v) for v in violations], seeded_fingerprints=seeded)

    def _generate_seeded_sets(self, task_code: str | None, seeds: dict[str, int]) -> dict[str, Any]:
        """Input sets made here from their seeds (``input_transport: seeded``), before any candidate code exists.

        The task's code runs in a throw-away namespace that is cleared (and collected) before the candidate's
        extension and module are imported, so the reference model is absent once they load (T3/T6). Returns
        ``{set: fingerprints}`` (or ``{set: {"error": ...}}``); the trusted side compares them with its own and
        hands over every set that differs. The guard snapshot is retaken afterwards: whatever the task's code
        did is not the candidate's doing.
        """
        if not seeds or not task_code:
            return {}
        import gc

        from cuda_agent.harness.compare import fingerprint
        from cuda_agent.harness.reference import generate_inputs

        torch = self.torch
        out: dict[str, Any] = {}
        namespace: dict[str, Any] = {"__name__": "cuda_agent_task_inputs"}
        try:
            exec(compile(task_code, "<task>", "exec"), namespace)  # noqa: S102 (the task's own code, from the task store)
            get_inputs = namespace["get_inputs"]
            for key, seed in seeds.items():
                try:
                    values = generate_inputs(torch, get_inputs, int(seed), self.device)
                except Exception as exc:  # the trusted side then stages this set
                    out[key] = {"error": f"{type(exc).__name__}: {exc}"}
                    continue
                self.inputs[int(key)] = values
                out[key] = [fingerprint(v) if type(v) is torch.Tensor else None for v in values]
        except Exception as exc:
            return {key: {"error": f"task code: {type(exc).__name__}: {exc}"} for key in seeds}
        finally:
            get_inputs = None
            namespace.clear()
            gc.collect()
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()
            self.guard_before = self.runtime.take_guard_snapshot()
        self.timer_before = self.timer.state()
        return out

    def op_inputs(self, req: dict[str, Any]) -> None:
        torch = self.torch
        described = [d for d in req["tensors"] if d["kind"] == "tensor" and "fd" in d]
        fds: list[int] = []
        try:
            if described:  # a set staged in memory files or device allocations: descriptors came with the request
                from cuda_agent.harness._vmm import recv_fds

                if self.fd_sock is None:
                    raise ValueError("this runner has no descriptor socket")
                fds = recv_fds(self.fd_sock, len(described), 5.0)
            values = [self._received(d, fds) for d in req["tensors"]]
        except Exception as exc:  # noqa: BLE001 - reported; the trusted side hands this set over through files
            if not described:
                raise
            self.send(ok=False, fd_error=True, error=f"{type(exc).__name__}: {exc}"[:500])
            return
        finally:
            from cuda_agent.harness._vmm import close_fds

            close_fds(fds)
        self.inputs[int(req["set"])] = values
        self.send(ok=True, set=req["set"])

    def _received(self, d: dict[str, Any], fds: list[int]) -> Any:
        """One input of an ``inputs`` request, in this process's memory: a value, or a tensor from a CUDA IPC
        handle, a staged file, a memory file's or a device allocation's descriptor (``fds[d['fd']]``)."""
        torch = self.torch
        if d["kind"] != "tensor":
            return d.get("value")
        dtype = getattr(torch, d["dtype"])
        if "ipc" in d:
            import pickle

            from torch.multiprocessing.reductions import rebuild_cuda_tensor

            args = pickle.loads(base64.b64decode(d["ipc"]))  # trusted -> candidate direction
            shared = rebuild_cuda_tensor(*args)
            # Own copy, then release the mapping at once: the producer's IPC reference count drops now,
            # so killing this process later cannot pin the reference process's memory.
            t = shared.clone(memory_format=torch.preserve_format)
            torch.cuda.synchronize()  # the copy is done before the mapping goes away
            del shared
            return t
        cuda = str(self.device).startswith("cuda")
        if "fd" in d:
            t = self._from_fd(fds[int(d["fd"])], d, dtype)
        elif cuda:
            t = self._device_reader().read(Path(d["file"]), d["shape"], dtype)
        else:
            from cuda_agent.harness._staging import read_tensor_file

            host = read_tensor_file(Path(d["file"]), d["shape"], dtype)
            return torch.empty_strided(d["shape"], d["stride"], dtype=dtype, device=self.device).copy_(host)
        if list(t.stride()) != list(d["stride"]):  # read C-contiguous: laid out as described
            t = torch.empty_strided(d["shape"], d["stride"], dtype=dtype, device=self.device).copy_(t)
        if cuda:
            torch.cuda.synchronize()
        return t

    def _from_fd(self, fd: int, d: dict[str, Any], dtype: Any) -> Any:
        """The C-contiguous tensor ``d`` describes, from descriptor ``fd``: a device allocation (``vmm``: one
        device-to-device copy) or a memory file (read into this process, through a pinned buffer on CUDA)."""
        torch = self.torch
        if d.get("vmm"):
            from cuda_agent.harness._vmm import driver_for, import_copy

            if self._vmm_driver is None:
                self._vmm_driver = driver_for(torch, self.device)
            raw = import_copy(torch, self._vmm_driver, fd, int(d["nbytes"]), int(d["alloc"]), self.device)
            return raw.view(dtype).view(d["shape"])
        if str(self.device).startswith("cuda"):
            return self._device_reader().read_fd(fd, d["shape"], dtype)
        from cuda_agent.harness._staging import read_tensor_fd

        return read_tensor_fd(fd, d["shape"], dtype)

    def _device_reader(self) -> Any:
        """The pinned-buffer reader of staged input files (CUDA)."""
        if self._reader is None:
            from cuda_agent.harness._staging import DeviceReader

            self._reader = DeviceReader(self.device)
        return self._reader

    def _copy_inputs(self, k: int) -> list[Any]:
        """Copies of input set ``k`` in per-position staging buffers (pristine data stays untouched, T5).

        The staging buffer of an input position is reused by every call whose input there has the
        same layout, so successive calls see the SAME addresses with DIFFERENT data: a result
        memoised by ``data_ptr``/shape is stale on the next set and fails the spot checks (T12).
        Each call gets fresh tensor objects viewing the buffer.
        """
        torch = self.torch
        out = []
        for i, v in enumerate(self.inputs[k]):
            if not isinstance(v, torch.Tensor):
                out.append(v)
                continue
            buf = self.staging.get(i)
            if buf is None or buf.shape != v.shape or buf.dtype != v.dtype or buf.stride() != v.stride():
                buf = v.clone(memory_format=torch.preserve_format)
                self.staging[i] = buf
            else:
                buf.copy_(v)
            out.append(buf.as_strided(buf.shape, buf.stride(), buf.storage_offset()))
        return out

    def _poison(self) -> None:
        """Fill memory of output size with NaN and free it, so an uninitialised output reads NaN (T4/T21)."""
        torch = self.torch
        bufs = []
        for spec in self.output_specs:
            dtype = getattr(torch, spec["dtype"])
            fill = float("nan") if dtype.is_floating_point or dtype.is_complex else -7
            bufs.append(torch.full(spec["shape"], fill, dtype=dtype, device=self.device))
        del bufs

    def op_call(self, req: dict[str, Any]) -> None:
        torch = self.torch
        from cuda_agent.harness.compare import fingerprint

        k = int(req["set"])
        args = self._copy_inputs(k)
        self.last = []
        self._poison()
        audit = bool(req.get("audit"))
        ops: list[Any] = []
        violations: list[Any] = []
        model = self.model
        runtime = self.runtime

        kernels: list[str] = []

        def forward() -> Any:
            if not audit:
                return model(*args)
            with runtime.audit_ops() as seen:
                result = model(*args)
            ops.extend(seen)
            kernels.extend(getattr(seen, "kernels", []))
            return result

        out, ms, host_ms = self.timer.time_call(forward, flush=bool(req.get("flush", True)), warm=args)
        if audit:
            violations += runtime.op_audit_violations(ops, "cuda" if self.device.startswith("cuda") else "cpu")
            origin = getattr(runtime, "kernel_origin_violations", None)
            if kernels and origin is not None and self.so_path is not None:
                violations += origin(kernels, self.so_path)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        metas = []
        ranges = [_storage_range(a) for a in args if type(a) is torch.Tensor]
        for j, o in enumerate(outs):
            meta: dict[str, Any] = {"type": f"{type(o).__module__}.{type(o).__qualname__}"}
            if type(o) is torch.Tensor:
                r = _storage_range(o)
                meta.update(
                    exact_tensor=True,
                    dtype=str(o.dtype).removeprefix("torch."),
                    shape=list(o.shape),
                    stride=list(o.stride()),
                    device=o.device.type,
                    contiguous=o.is_contiguous(),
                    nbytes=o.numel() * o.element_size(),
                    alias_input=any(r[0] < b[1] and b[0] < r[1] for b in ranges) if r[1] > r[0] else False,
                    requires_grad=bool(o.requires_grad),
                )
                spec = self.output_specs[j] if j < len(self.output_specs) else None
                matches = spec is not None and list(o.shape) == list(spec["shape"]) and meta["dtype"] == spec["dtype"]
                # Only outputs the trusted side will read are fingerprinted (a huge wrong one is not touched).
                meta["fingerprint"] = fingerprint(o) if matches else None
            else:
                meta["exact_tensor"] = False
            metas.append(meta)
        self.last = outs
        input_fps = [fingerprint(a) if type(a) is torch.Tensor else None for a in args]
        self.send(
            ok=True,
            ms=ms,
            host_ms=host_ms,
            outputs=metas,
            input_fingerprints=input_fps,
            ops=[str(o) for o in ops][:200],
            violations=[_violation_dict(v) for v in violations],
            threads=_native_threads(),
        )

    def op_export(self, req: dict[str, Any]) -> None:
        torch = self.torch
        descs: list[Any] = []
        fds: list[int] = []
        for i, o in enumerate(self.last):
            if type(o) is not torch.Tensor:
                descs.append(None)
                continue
            o = o.detach()
            if o.device.type == "cuda" and req.get("transport") == "vmm" and o.numel() and self._vmm_ready():
                try:
                    from cuda_agent.harness._staging import _raw_bytes

                    desc = self._vmm.stage(i, _raw_bytes(o))
                    fds.append(desc.pop("fd"))
                    descs.append(desc)
                    continue
                except Exception as exc:  # noqa: BLE001 - reported; this output goes through a file instead
                    self._vmm_error = f"{type(exc).__name__}: {exc}"[:500]
            if o.device.type == "cuda" and req.get("transport", "ipc") == "ipc":
                from torch.multiprocessing.reductions import reduce_tensor

                _, args = reduce_tensor(o)
                descs.append({"ipc": _encode(list(args))})
            else:
                assert self.exchange is not None
                if self._slots is None:
                    from cuda_agent.harness._staging import SlotWriter

                    self._slots = SlotWriter(self.exchange)
                # One file per output position, rewritten in place: one device-to-host copy into mapped pages.
                path = self._slots.write(f"out_{i}.bin", o)
                descs.append({"file": str(path)})
        if fds:  # the descriptors travel first: they are queued on the socket before the answer is read
            from cuda_agent.harness._vmm import send_fds

            send_fds(self.fd_sock, fds)
        self.send(ok=True, outputs=descs, vmm_error=self._vmm_error)

    def _vmm_ready(self) -> bool:
        """The 'vmm' transport can be used here (socket present, driver calls worked so far)."""
        if self._vmm_error is not None or self.fd_sock is None:
            return False
        if self._vmm is None:
            try:
                from cuda_agent.harness._vmm import VmmExporter

                self._vmm = VmmExporter(self.torch, self.device)
            except Exception as exc:  # noqa: BLE001 - reported; files are used instead
                self._vmm_error = f"{type(exc).__name__}: {exc}"[:500]
                return False
        return True

    def op_calibrate(self, req: dict[str, Any]) -> None:
        """The timing protocol's own cost per call (null calls), measured before the candidate is loaded: the
        trusted side sends this under the device's timing lock and subtracts the answer (``timing_net_overhead``).
        The pre-roll spin is sized again first, alone on the device (the runner sized it when it started, beside
        other processes' GPU work: a spin shorter than asked leaves host latency in a null call's time), and the
        timer's guarded state is taken anew; the answer says how the spin was sized."""
        if self.model is not None:
            self.send(ok=False, error="calibrate must come before load")
            return
        from cuda_agent.harness.timing import calibrated_overhead

        self.timer.recalibrate_spin()
        self.timer_before = self.timer.state()
        self.send(ok=True, overhead_ms=calibrated_overhead(self.timer), spin=self.timer.spin_calibration())

    def op_guard(self, req: dict[str, Any]) -> None:
        violations = self._guard_violations()
        self.send(ok=True, violations=[_violation_dict(v) for v in violations], threads=_native_threads())

    def op_kernels(self, req: dict[str, Any]) -> None:
        from cuda_agent.harness.timing import kernel_breakdown, profiler_sum_ms

        # Guard first: threads the profiler starts below are the harness's and are excused afterwards.
        violations = self._guard_violations()
        args = self._copy_inputs(int(req["set"]))
        model = self.model
        result: dict[str, Any] = {"ok": True, "violations": [_violation_dict(v) for v in violations]}
        before = set(_native_thread_ids())
        if req.get("breakdown"):
            result["per_kernel"] = kernel_breakdown(lambda: model(*args), self.device)
        if req.get("profiler_sum"):
            result["profiler_sum_ms"] = profiler_sum_ms(lambda: model(*args), self.device)
        excused = getattr(self.runtime, "_HARNESS_THREADS", None)
        if isinstance(excused, set):
            excused.update(set(_native_thread_ids()) - before)
        self.send(**result)


def _storage_range(t: Any) -> tuple[int, int]:
    """[start, end) byte addresses of the storage behind tensor ``t``."""
    s = t.untyped_storage()
    start = s.data_ptr()
    return start, start + s.nbytes()


def _native_threads() -> int:
    """Threads of this process as the kernel sees them (Python and native)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _native_thread_ids() -> list[str]:
    """Kernel thread ids of this process."""
    try:
        return os.listdir("/proc/self/task")
    except OSError:
        return []


def _violation_dict(v: Any) -> dict[str, Any]:
    if hasattr(v, "model_dump"):
        return v.model_dump(mode="json")
    return dict(v)


def main() -> int:
    """Entry point inside the sandbox."""
    in_fd, out_fd = (int(x) for x in os.environ["CUDA_AGENT_RUNNER_FDS"].split(","))
    device = os.environ.get("CUDA_AGENT_DEVICE", "cpu")
    runner = _Runner(out_fd)
    try:
        runner.start(device)
    except Exception as exc:
        runner.send(ok=False, error=f"runner start failed: {exc}", traceback=traceback.format_exc()[-3000:])
        return 1
    runner.send(ok=True, ready=True, pid=os.getpid(), threads=runner.torch.get_num_threads(),
                spin=runner.timer.spin_calibration())
    inp = os.fdopen(in_fd, "r")
    for line in inp:
        req = json.loads(line)
        op = req.get("op")
        if op == "exit":
            break
        handler = getattr(runner, f"op_{op}", None)
        if handler is None:
            runner.send(ok=False, error=f"unknown op {op!r}")
            continue
        try:
            handler(req)
        except BaseException as exc:  # noqa: BLE001 - everything the candidate raises is reported
            runner.send(
                ok=False,
                error=f"{type(exc).__name__}: {exc}"[:2000],
                traceback=traceback.format_exc()[-4000:],
            )
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
