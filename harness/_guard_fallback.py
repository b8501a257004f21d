"""Minimal runtime guard used by the candidate runner when ``integrity.runtime`` is absent.

Same function names and return shapes as ``cuda_agent.harness.integrity.runtime``
(violations as dicts with ``rule``/``message``/``file``/``line``), covering
timer and checker identities (T7/T8), torch flags (T16) and threads (T10).
The integrity engineer's module supersedes it whenever importable.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any


def _identities() -> dict[str, int]:
    import torch

    named: dict[str, Any] = {
        "time.perf_counter": time.perf_counter,
        "time.time": time.time,
        "time.monotonic": time.monotonic,
        "torch.allclose": torch.allclose,
        "torch.equal": torch.equal,
        "torch.testing.assert_close": torch.testing.assert_close,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.Tensor.__eq__": torch.Tensor.__eq__,
    }
    return {k: id(v) for k, v in named.items()}


def _flags() -> dict[str, Any]:
    import torch

    return {
        "allow_tf32.matmul": torch.backends.cuda.matmul.allow_tf32,
        "allow_tf32.cudnn": torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "num_threads": torch.get_num_threads(),
        "grad_enabled": torch.is_grad_enabled(),
    }


#: Variables torch sets itself on lazy imports (inductor, triton caches).
_TORCH_OWN_ENV = ("TORCHINDUCTOR_", "TRITON_", "TORCH_COMPILE_")


def take_guard_snapshot() -> dict[str, Any]:
    """Timer/checker identities, torch flags, thread counts and environment, now."""
    try:
        native = len(os.listdir("/proc/self/task"))
    except OSError:
        native = -1
    return {
        "identities": _identities(),
        "flags": _flags(),
        "threads": threading.active_count(),
        "native_threads": native,
        "env": dict(os.environ),
    }


def compare_guard_snapshot(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Violations between two snapshots (empty = nothing changed)."""
    out: list[dict[str, Any]] = []

    def v(rule: str, message: str) -> None:
        out.append({"rule": rule, "message": message, "file": None, "line": None})

    for name, ident in before["identities"].items():
        if after["identities"].get(name) != ident:
            rule = "T8.runtime.timer_patched" if ("time" in name or "cuda" in name) else "T7.runtime.checker_patched"
            v(rule, f"{name} was replaced after the candidate loaded")
    for name, value in before["flags"].items():
        if after["flags"].get(name) != value:
            v("T16.runtime.flag_changed", f"{name} changed from {value!r} to {after['flags'].get(name)!r}")
    if after["threads"] > before["threads"] or after["native_threads"] > before["native_threads"]:
        v(
            "T10.runtime.thread_started",
            f"threads before load: {before['threads']} Python / {before['native_threads']} native; "
            f"now {after['threads']} / {after['native_threads']} — background threads are not allowed",
        )
    changed = sorted(
        k
        for k in set(before["env"]) | set(after["env"])
        if before["env"].get(k) != after["env"].get(k) and not k.startswith(_TORCH_OWN_ENV)
    )
    if changed:
        v("T16.runtime.env_changed", f"environment variables changed: {', '.join(changed[:10])}")
    return out


@contextlib.contextmanager
def audit_ops() -> Iterator[list[str]]:
    """Collect the ATen ops executed inside the block (TorchDispatchMode)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: list[str] = []

    class _Audit(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            ops.append(str(func.overloadpacket.__name__))
            return func(*args, **(kwargs or {}))

    with _Audit():
        yield ops


_ALLOWED_OPS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "view", "reshape", "_reshape_alias", "as_strided", "contiguous", "clone", "copy_", "_to_copy", "to",
    "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "select", "slice", "detach", "alias",
    "new_empty", "new_zeros", "new_full", "new_empty_strided", "resize_", "size", "stride", "lift_fresh",
}


def op_audit_violations(ops: list[str], kind: str) -> list[dict[str, Any]]:
    """Ops outside the allocation/view/copy allowlist (T1 at runtime)."""
    bad = sorted({o for o in ops if o not in _ALLOWED_OPS})
    if not bad:
        return []
    return [
        {
            "rule": "T1.runtime.aten_compute",
            "message": f"forward executed PyTorch compute ops: {', '.join(bad[:10])}; only the extension may compute",
            "file": None,
            "line": None,
        }
    ]
