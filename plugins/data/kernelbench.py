"""Task source ``kernelbench``: a KernelBench checkout, ``KernelBench/level{1,2,3}/*.py``.

``--tasks kernelbench:/data/KernelBench?levels=1,2&ids=1-10``. Level 4 needs
model downloads and is refused with a clear error (offline machines).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.task import TaskManifest


class KernelBenchConfig(BaseModel):
    """Where the checkout is and which problems to take."""

    model_config = ConfigDict(extra="forbid")

    target: Path = Field(description="KernelBench checkout root (holding KernelBench/level1/...) or the KernelBench folder.")
    levels: str | int = Field("1,2,3", description="Levels to take, e.g. '1,2' or 1 (4 needs model downloads).")
    ids: str | int | None = Field(None, description="Problem numbers (file-name prefix), e.g. '1-10,19'; None = all.")
    sizes: Literal["full", "reduced"] = Field(
        "full", description="'reduced' scales each problem's data sizes down (CPU, CI); results are then not comparable "
        "to published KernelBench numbers."
    )


class KernelBenchSource:
    """Yields the selected KernelBench problems in level, then problem-number order."""

    def __init__(self, config: KernelBenchConfig) -> None:
        self.config = config

    def iter_tasks(self) -> Iterator[TaskManifest]:
        """Tasks with ids 'kernelbench/level<N>/<stem>'."""
        from cuda_agent.harness.evaluation.task_sources import iter_kernelbench

        return iter_kernelbench(self.config.target, self.config.levels, self.config.ids, self.config.sizes)


@hookimpl
def register_data_sources(register):
    """Register the ``kernelbench`` task source."""
    register("kernelbench", KernelBenchSource, config_model=KernelBenchConfig)
