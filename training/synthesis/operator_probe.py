"""Probing a candidate operator on small tensors: is it elementwise, which
input domain keeps it finite, which range its outputs fall in, is it stochastic.

Used by the miners only (in the mining process, on tiny CPU tensors, with
names already screened against :data:`UNSAFE_NAME_PARTS`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

#: Name fragments of torch callables that are never probed (global state, I/O, allocation-only...).
UNSAFE_NAME_PARTS: tuple[str, ...] = (
    "set_", "seed", "save", "load", "use_", "compile", "export", "jit", "cuda", "empty", "from_", "as_",
    "is_", "can_", "get_", "result_type", "promote_types", "cudnn", "quantiz", "fake_", "sparse", "q_",
    "fbgemm", "mkldnn", "miopen", "native_", "vmap", "autocast", "align", "rename", "resize", "pin_memory",
    "share_memory", "record_stream", "backward", "requires_grad", "retain", "register", "numpy", "tolist",
    "item", "storage", "data_ptr", "dequantize", "int_repr", "nested", "to_", "new_", "_like", "detach",
    "clone", "contiguous", "deprecat", "warn", "sym_", "print", "dsplit", "split", "chunk", "unbind",
    "fill", "zero", "ones", "rand", "normal", "poisson", "multinomial", "bernoulli", "dropout",
    "alpha_dropout", "feature_", "affine_grid", "grid_sample", "embedding", "one_hot", "pad", "interpolate",
    "upsample", "pixel_", "channel_shuffle", "histc", "bincount", "unique", "nonzero", "argwhere", "where",
    "sort", "argsort", "topk", "kthvalue", "msort", "flip", "roll", "rot90", "transpose", "permute",
)
#: Exact names never probed.
UNSAFE_NAMES: frozenset[str] = frozenset({"t", "T", "H", "mT", "mH", "abs_", "positive", "conj", "resolve_conj", "resolve_neg", "real", "imag"})


def probe_allowed(name: str) -> bool:
    """True when ``name`` may be called on a probe tensor."""
    low = name.lower()
    return not name.startswith("_") and not name.endswith("_") and name not in UNSAFE_NAMES and not any(p in low for p in UNSAFE_NAME_PARTS)


def _tensor(kind: str, shape: tuple[int, ...], seed: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(seed)
    if kind == "real":
        return torch.randn(shape, generator=g) * 2.0
    if kind == "positive":
        return torch.rand(shape, generator=g) * 2.0 + 0.1
    return torch.rand(shape, generator=g) * 1.8 - 0.9  # sym_unit


def value_range_of(values: Any) -> str:
    """The tightest named range ('unit', 'positive', 'nonneg', 'sym_unit', 'real') holding ``values``."""
    lo, hi = float(values.min()), float(values.max())
    if lo > 0 and hi < 1:
        return "unit"
    if lo > 0:
        return "positive"
    if lo >= 0:
        return "nonneg"
    if lo > -1 and hi < 1:
        return "sym_unit"
    return "real"


def probe_unary(fn: Callable[[Any], Any], shape: tuple[int, ...] = (4, 6, 5)) -> tuple[dict[str, Any] | None, str]:
    """Probe ``fn`` as an elementwise unary tensor op.

    :returns: (facts, "") with keys domain, output_range, stochastic; or (None, reason).
    """
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        domain = None
        for kind in ("real", "positive", "sym_unit"):
            x = _tensor(kind, shape, 1)
            try:
                with torch.no_grad():
                    y = fn(x.clone())
            except Exception as exc:  # noqa: BLE001 - any failure means "not this domain"
                last = f"raises {type(exc).__name__}"
                continue
            if not isinstance(y, torch.Tensor):
                return None, f"returns {type(y).__name__}, not a tensor"
            if y.shape != x.shape:
                return None, f"changes shape {tuple(x.shape)} -> {tuple(y.shape)} (not elementwise)"
            if not y.is_floating_point():
                return None, f"returns dtype {y.dtype}"
            if bool(torch.isfinite(y).all()):
                domain = kind
                break
            last = "non-finite outputs"
        if domain is None:
            return None, f"no domain gives finite outputs ({last})"
        x = _tensor(domain, shape, 2)
        with torch.no_grad():
            y = fn(x.clone())
            y_again = fn(x.clone())
            stochastic = not torch.equal(y, y_again)
            if torch.equal(y, x):
                return None, "identity on its inputs"
            other = fn(_tensor(domain, shape, 3))
            if torch.allclose(y, other):
                return None, "output does not depend on the input"
            if not stochastic:
                perm = torch.randperm(x.numel(), generator=torch.Generator().manual_seed(4))
                y_perm = fn(x.flatten()[perm].reshape(x.shape).clone())
                if not torch.allclose(y.flatten()[perm], y_perm.flatten(), atol=1e-5, rtol=1e-4, equal_nan=True):
                    return None, "not elementwise (result depends on neighbours)"
            wide = fn(_tensor(domain, (64, 64), 5) * (3.0 if domain == "real" else 1.0))
        if not bool(torch.isfinite(wide).all()):
            return None, "non-finite outputs on a wider sample of its domain"
        return {"domain": domain, "output_range": value_range_of(torch.cat([y.flatten(), wide.flatten()])), "stochastic": stochastic}, ""
