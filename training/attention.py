"""Which attention kernels the policy's forwards may use (generation and the trainer's log-probs alike).

cuDNN's SDPA backend, torch's first pick for bf16/fp16 on Hopper, builds an execution plan for every new shape.
A decode step's key length is new at every step of every batch, and training batches come in ever new padded
lengths, so each forward paid a plan build: on the H200 (session 20, ``benchmarks/generation_profile.py``) the
learning curve's bf16 actor stepped in 42-62 ms of CPU on fresh lengths and in 6 ms once the same lengths came
again; the fp32 engine, which never picks cuDNN, in 3.6 ms. The other backends have no per-shape setup. Generation
and the trainer use the same set, so the log-probs the trainer recomputes come from the same kernels as the
sampled ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

#: SDPA backends (``torch.nn.attention.SDPBackend`` member names) the policy's forwards may use: torch's choice
#: minus cuDNN.
ATTENTION_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def attention_backends(names: Sequence[str] | None = ATTENTION_BACKENDS) -> Any:
    """A context in which SDPA may use only ``names``; None: torch's own choice (nothing restricted).

    torch keeps the allowed set process-wide: threads entering and leaving at once may leave cuDNN disabled after
    the last one left (slower for nobody here: every policy forward excludes it anyway)."""
    if names is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    unknown = [n for n in names if not hasattr(SDPBackend, n)]
    if unknown:
        raise ValueError(f"unknown SDPA backend(s) {unknown}; valid: {', '.join(SDPBackend.__members__)}")
    return sdpa_kernel([getattr(SDPBackend, n) for n in names])
