"""A compatibility shim for Triton 3.6's interpreter with NumPy >= 2.4 (CPU devices only).

The interpreter holds scalar kernel arguments as one-element arrays and turns them into Python integers with
``int(array)``, which NumPy 2.4 refuses for arrays with a dimension ("only 0-dimensional arrays can be converted to
Python scalars"): every ``for i in range(0, n, BLOCK)`` with a runtime ``n`` then fails. :func:`patch_scalar_index`
makes that conversion read the one element; it is applied only where the failure shows (probed), by the trusted
loader before the candidate exists, and never on a GPU, where the interpreter is not used.
"""

from __future__ import annotations


def _needs_patch() -> bool:
    import numpy as np

    try:
        int(np.array([1], dtype=np.int32))
    except TypeError:
        return True
    return False


def patch_scalar_index() -> bool:
    """Patch the interpreter's ``__index__`` of scalars when NumPy refuses ``int()`` of a 1-element array; True if
    patched."""
    if not _needs_patch():
        return False
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_cuda_agent_compat", False):
        return True

    def patched(tensor, scope):  # type: ignore[no-untyped-def]
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patched._cuda_agent_compat = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched
    return True


def _run_once(fn, quantiles=None, **_kwargs):  # type: ignore[no-untyped-def]
    """``do_bench`` for the interpreter: run the config once (errors surface as on a GPU) and report equal times."""
    fn()
    return [0.0] * len(quantiles) if quantiles else 0.0


def patch_autotune_bench() -> None:
    """Let ``@triton.autotune`` kernels run under the interpreter (CPU devices only).

    Triton's autotuner times each config with the active driver's benchmarker, and the interpreter has no driver
    ("0 active drivers"): every autotuned solution failed on its first call on the CPU backend. Each config now runs
    once and all report the same time, so the first config is kept; timing among configs means nothing on a CPU
    anyway. Applied by the trusted loader before the candidate exists, never on a GPU."""
    from triton.runtime import autotuner

    if isinstance(autotuner.Autotuner.__dict__.get("do_bench"), _CompatBench):
        return
    autotuner.Autotuner.do_bench = _CompatBench(
        lambda self: self._do_bench if self._do_bench is not None else _run_once)


class _CompatBench(property):
    """The patched ``Autotuner.do_bench`` (a marker class, so the patch is applied once)."""
