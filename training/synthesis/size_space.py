"""The sizes composed tasks draw from, at full size and at the CPU backend's size.

A composed task has module-level sizes drawn from a :class:`SizeSpace` (the
full, target-device sizes) and a ``CPU_SIZES`` variant for the CPU backend
(see ``cuda_agent.harness.tasks``). Each drawn CPU size is the full size
*mapped* into the CPU space: the value at the same relative position of the
CPU list (so larger full sizes get larger CPU sizes), never above the full
size. Drawing nothing extra keeps candidate ``i`` of a seed the same task
whatever the CPU space is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: Kinds whose value shapes the operator itself (a 5x5 conv stays 5x5 on the CPU when the CPU space allows it).
STRUCTURAL_KINDS = frozenset({"kernel_sizes", "pool_sizes"})

#: The lists of a SizeSpace a drawn size can come from.
SizeKind = Literal["batch", "batch_nd", "features", "channels", "spatial", "lengths", "seq", "kernel_sizes", "pool_sizes"]


class SizeSpace(BaseModel):
    """Sizes the composer draws from (module-level constants of the tasks)."""

    model_config = ConfigDict(extra="forbid")

    batch: list[int] = Field(default_factory=lambda: [8, 16], description="Batch sizes (dim 0) of rank-2 inputs.")
    batch_nd: list[int] | None = Field(None, description="Batch sizes of rank-3/4 inputs; None = same as batch.")
    features: list[int] = Field(default_factory=lambda: [64, 128, 256], description="Feature sizes of rank-2/3 inputs and Linear outputs.")
    channels: list[int] = Field(default_factory=lambda: [4, 8, 16], description="Channel counts (dim 1 of rank-3/4 inputs, conv outputs).")
    spatial: list[int] = Field(default_factory=lambda: [16, 32], description="Height/width sizes of rank-4 [N, C, H, W] inputs.")
    lengths: list[int] | None = Field(None, description="Lengths (dim 2) of rank-3 [N, C, L] inputs; None = 4 x each spatial size.")
    seq: list[int] = Field(default_factory=lambda: [16, 32], description="Sequence lengths (dim 1 of rank-3 inputs of the [N, S, D] layout).")
    kernel_sizes: list[int] = Field(default_factory=lambda: [1, 3, 5], description="Conv kernel sizes.")
    pool_sizes: list[int] = Field(default_factory=lambda: [2], description="Pool kernel sizes.")
    max_elements: int = Field(4_000_000, description="Largest tensor (elements) a chain may create; bigger steps are not chosen.")

    @classmethod
    def from_example(cls, shape: Sequence[int]) -> SizeSpace:
        """Sizes that reproduce ``shape`` as closely as the layouts allow (single-op rendering)."""
        dims = list(shape) + [8] * (3 - len(shape))  # [N, C or S, L or H, ...]
        return cls(batch=[dims[0]], features=[dims[-1], dims[1]], channels=[dims[1]], spatial=[max(dims[2], 8)],
                   seq=[dims[1]], kernel_sizes=[3], pool_sizes=[2], max_elements=10**9)

    def choices(self, kind: SizeKind) -> list[int]:
        """The list sizes of ``kind`` are drawn from (``batch_nd`` falls back to ``batch``, ``lengths`` to 4 x ``spatial``)."""
        if kind == "batch_nd":
            return list(self.batch_nd or self.batch)
        if kind == "lengths":
            return list(self.lengths or [4 * s for s in self.spatial])
        return list(getattr(self, kind))


def default_cpu_sizes() -> SizeSpace:
    """The CPU backend's default space: eager forwards of a few ms at most on one core.

    Spatial sizes start at 16 so a 5x5 conv, a 2x pool and another conv still fit;
    channel counts are even so GroupNorm has a group count at both sizes.
    """
    return SizeSpace(batch=[2, 4], batch_nd=[2], features=[16, 32, 64], channels=[4, 8, 16], spatial=[16, 24, 32],
                     seq=[8, 16], kernel_sizes=[1, 3, 5], pool_sizes=[2], max_elements=2**18)


def cpu_size(kind: SizeKind, value: int, full: SizeSpace, cpu: SizeSpace) -> int:
    """The CPU size of a full size ``value`` drawn from ``full.choices(kind)``.

    The value at the same relative position of ``cpu.choices(kind)``, capped at
    ``value`` (a CPU variant is never larger than the task); a value not in
    the full list maps to the smallest CPU choice (capped likewise). Kernel and
    pool sizes that the CPU space also offers are kept as they are.

    >>> full, cpu = SizeSpace(features=[512, 1024, 4096]), SizeSpace(features=[16, 64])
    >>> [cpu_size("features", v, full, cpu) for v in (512, 1024, 4096, 8)]
    [16, 16, 64, 8]
    """
    options = full.choices(kind)
    small = sorted(cpu.choices(kind))
    if not small or (kind in STRUCTURAL_KINDS and value in small):
        return value
    if value in options and len(options) > 1:
        rank = sorted(options).index(value) / (len(options) - 1)
        mapped = small[int(rank * (len(small) - 1) + 1e-9)]
    else:
        mapped = small[0]
    return min(mapped, value)
