"""The trusted comparison, inside the reference process: the candidate's exported outputs against the expected ones.

The candidate's outputs arrive as descriptions (:class:`~cuda_agent.harness.messages.ExportedOutput`): a slot file
in the exchange folder, CUDA IPC arguments rebuilt with trusted classes only (never unpickled), or a device
allocation whose descriptor came over the descriptor socket ('vmm'). Each is copied into this process's memory
and compared where the expected output lives (:func:`cuda_agent.harness.compare.compare_output`); a fingerprint
that differs from the one the runner took at return means the output changed afterwards (T10).
"""

from __future__ import annotations

import base64
import inspect
import math
from pathlib import Path
from typing import Any

from cuda_agent.harness.messages import ExportedOutput, OutputMeta, Violation
from cuda_agent.harness.reference_messages import Check, Verdict
from cuda_agent.schemas.result import CheckError


class _Unreadable:
    """An exported output whose description does not fit its metadata (reported as an export error)."""

    def __init__(self, message: str) -> None:
        self.message = message


class OutputChecker:
    """Reads exported outputs into the reference process and compares them (one per reference process)."""

    def __init__(self, torch: Any, device: Any, driver: Any) -> None:
        """:param driver: returns the 'vmm' driver calls of this device (made on first use)."""
        self.torch = torch
        self.device = device
        self._driver = driver
        self._reader: Any = None  # DeviceReader of staged output files (CUDA)

    def check(self, req: Check, expected: list[Any], fds: list[int], rms: dict[int, float] | None = None,
              floor: float = 0.0, noise: dict[int, float] | None = None) -> Verdict:
        """Compare the outputs ``req`` describes with ``expected``; ``fds``: the 'vmm' outputs' descriptors; ``rms``:
        each expected output's RMS magnitude by position, filled on first use (the set keeps it: a set is checked
        many times); ``floor``: the tolerance floor of a widened set, ``noise``: an ordinary set's measured noise floor by
        output position (:func:`~cuda_agent.harness.compare.compare_output`, harness/noise_floor.py)."""
        from cuda_agent.harness.compare import compare_output, fingerprint

        torch = self.torch
        noise = noise or {}
        errors: list[CheckError] = []
        violations: list[Violation] = []
        try:
            opened = self._open_vmm(req.outputs, req.metas, fds) if fds else {}
        except Exception as exc:  # noqa: BLE001 - the driver refused: the trusted side falls back to files
            return Verdict(transport_failed=f"{type(exc).__name__}: {exc}"[:500])
        k = req.set
        for i, (e, desc, meta) in enumerate(zip(expected, req.outputs, req.metas)):
            if desc is None:
                continue
            try:
                actual = opened.pop(i) if i in opened else self._open_output(desc, meta)
                if isinstance(actual, _Unreadable):
                    raise ValueError(actual.message)
            except Exception as exc:  # noqa: BLE001 - malformed candidate data
                errors.append(CheckError(check="export", message=f"output {i}: could not read it: {exc}",
                                         input_set=k, output=i))
                continue
            if meta.fingerprint and fingerprint(actual) != meta.fingerprint:
                violations.append(Violation(rule="T10.runtime.output_changed", message=f"output {i} changed after "
                                            "forward returned (work still running in the background?)"))
            atol, rtol = req.tolerances.get(str(e.dtype).removeprefix("torch."), req.tolerances["*"])
            if rms is not None and i not in rms and isinstance(e, torch.Tensor) and e.is_floating_point():
                from cuda_agent.harness.compare import reference_rms

                rms[i] = reference_rms(e)
            errors += compare_output(e, actual, atol=atol, rtol=rtol, input_set=k, index=i,
                                     rms=rms.get(i) if rms is not None else None, floor=floor,
                                     noise=noise.get(i, 0.0))
            del actual
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return Verdict(errors=errors, violations=violations, noise_floors={str(i): v for i, v in noise.items()})

    def _open_vmm(self, exports: list[ExportedOutput | None], metas: list[OutputMeta], fds: list[int]) -> dict[int, Any]:
        """The 'vmm' outputs, copied into this process's memory, by output position.

        Driver failures raise (the transport does not work here); a description that does not fit its metadata
        gives a ValueError stored for that output (reported as an export error of the candidate).
        """
        from cuda_agent.harness._vmm import import_copy

        torch = self.torch
        out: dict[int, Any] = {}
        j = 0
        for i, (desc, meta) in enumerate(zip(exports, metas)):
            if desc is None or not desc.vmm:
                continue
            fd = fds[j]
            j += 1
            dtype = getattr(torch, str(meta.dtype), None)
            if not isinstance(dtype, torch.dtype):
                out[i] = _Unreadable(f"unknown dtype {meta.dtype!r}")
                continue
            shape = [int(x) for x in meta.shape or []]
            want = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
            nbytes, alloc = int(desc.nbytes if desc.nbytes is not None else -1), int(desc.alloc or -1)
            if nbytes != want:
                out[i] = _Unreadable(f"buffer holds {nbytes} bytes, shape {shape} of {dtype} needs {want}")
                continue
            raw = import_copy(torch, self._driver(), fd, nbytes, alloc, self.device)
            out[i] = (raw.view(torch.bool) if dtype == torch.bool else raw.view(dtype)).view(shape)
        return out

    def _open_output(self, desc: ExportedOutput, meta: OutputMeta) -> Any:
        torch = self.torch
        dtype = getattr(torch, str(meta.dtype), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {meta.dtype!r}")
        shape = [int(s) for s in meta.shape or []]
        if desc.file is not None:
            if self.device.type == "cuda":  # compared where the expected output lives
                if self._reader is None:
                    from cuda_agent.harness._staging import DeviceReader

                    self._reader = DeviceReader(self.device)
                return self._reader.read(Path(desc.file), shape, dtype)
            from cuda_agent.harness._staging import read_tensor_file

            return read_tensor_file(Path(desc.file), shape, dtype)
        if desc.ipc is None:
            raise ValueError("the output's description names no file, IPC handle or device buffer")
        return rebuild_ipc_tensor(desc.ipc, dtype)


def rebuild_ipc_tensor(encoded: Any, dtype: Any) -> Any:
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
