"""Module state carried across calls (T12): a digest of every tensor the candidate's module holds.

The source rules refuse results kept across calls in C++ globals (``T12.cpp.static_cache``) and state stored on
``self`` by Python code in ``forward`` (``T12.python.state_in_forward``). A kernel handed one of the module's own
buffers as a scratch argument can still keep a content-keyed result cache there (session 37's red team: the last
15% of a GEMM's rows served from a cache keyed on 8 sampled input elements). An honest scratch buffer is rewritten
by every call: what it holds after a call depends on that call's inputs alone. A cache's content depends on every
set seen since it was made.

So the runner digests the module's tensors after the first call on the first verify set and after the determinism
check's second call on the same set (every other verify set called in between): equal digests for a module whose
state is a function of the last call (or never changes); different ones for state carried across calls. Left out:
the running statistics torch's own norm layers update in training mode (``running_mean``, ``running_var``,
``num_batches_tracked`` of ``BatchNorm*``/``InstanceNorm*``; the task's mode is KernelBench's: training), which change
every call and never the output. It runs inside the candidate's process, as every runtime check does; a cache kept
elsewhere (device globals, or a module whose digest it fakes) meets the near-duplicate widened sets
(harness/widening.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

#: Buffers of torch's own norm layers that change every call in training mode without changing the output.
RUNNING_STATS = ("running_mean", "running_var", "num_batches_tracked")
#: How deep lists, tuples and dicts held as attributes are searched for tensors.
MAX_DEPTH = 3


def _tensors(value: Any, torch: Any, prefix: str, depth: int, out: list[tuple[str, Any]]) -> None:
    if isinstance(value, torch.Tensor):
        out.append((prefix, value))
    elif depth < MAX_DEPTH and isinstance(value, (list, tuple)):
        out.append((f"{prefix}#len", len(value)))
        for i, v in enumerate(value):
            _tensors(v, torch, f"{prefix}[{i}]", depth + 1, out)
    elif depth < MAX_DEPTH and isinstance(value, dict):
        out.append((f"{prefix}#keys", sorted(map(repr, value))[:64]))
        for key, v in list(value.items())[:4096]:
            _tensors(v, torch, f"{prefix}[{key!r}]", depth + 1, out)


def module_tensors(model: Any, torch: Any) -> list[tuple[str, Any]]:
    """(name, tensor) of every parameter, buffer and tensor attribute of ``model`` and its submodules (tensors in
    lists, tuples and dicts too), torch's own running statistics left out; container lengths and keys as values."""
    out: list[tuple[str, Any]] = []
    if not isinstance(model, torch.nn.Module):
        return out
    norm = (torch.nn.modules.batchnorm._NormBase,)
    for name, mod in model.named_modules(remove_duplicate=True):
        skip = RUNNING_STATS if isinstance(mod, norm) else ()
        for key, t in list(mod._parameters.items()) + list(mod._buffers.items()):
            if t is not None and key not in skip:
                out.append((f"{name}.{key}", t))
        for key, v in vars(mod).items():
            if key.startswith("_") and key in ("_parameters", "_buffers", "_modules"):
                continue
            if isinstance(v, torch.nn.Module):
                continue
            _tensors(v, torch, f"{name}.{key}", 0, out)
    return out


def state_digest(model: Any, torch: Any) -> tuple[str, dict[str, str]]:
    """A digest of the module's state and each part's fingerprint (to name what changed)."""
    from cuda_agent.harness.compare import fingerprint

    parts: dict[str, str] = {}
    for name, v in module_tensors(model, torch):
        parts[name] = fingerprint(v) if isinstance(v, torch.Tensor) else repr(v)
    h = hashlib.sha256("\n".join(f"{k}={v}" for k, v in parts.items()).encode()).hexdigest()[:32]
    return h, parts


def changed_parts(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Names of the parts whose fingerprint differs (or that appeared or went)."""
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def state_carried(before: dict[str, str], after: dict[str, str]) -> list[Any]:
    """The T12 violation when the module's state after two calls on the same set differs (other sets called in
    between), naming what changed; empty when it does not."""
    from cuda_agent.harness.messages import Violation

    changed = changed_parts(before, after)
    if not changed:
        return []
    names = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return [Violation(rule="T12.runtime.module_state_carried",
                      message=f"the module's state after a second call on the same input set differs from after the "
                      f"first ({names}), other sets called in between: state carried across calls (a result cache?). "
                      "Scratch buffers are fine when every call rewrites what it reads")]
