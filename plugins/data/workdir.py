"""Task source ``workdir``: a CUDA-Agent-style agent workdir (``model.py``), or a folder of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.task import TaskManifest


class WorkdirConfig(BaseModel):
    """Which workdir."""

    model_config = ConfigDict(extra="forbid")

    target: Path = Field(description="A folder holding model.py, or a folder of such folders.")
    level: int | None = Field(None, description="Level to record for these tasks, if known.")


class WorkdirSource:
    """Yields the workdir's ``model.py`` as a task with id 'workdir/<folder name>'."""

    def __init__(self, config: WorkdirConfig) -> None:
        self.config = config

    def iter_tasks(self) -> Iterator[TaskManifest]:
        """One task per workdir."""
        from cuda_agent.harness.evaluation.task_sources import iter_workdir

        return iter_workdir(self.config.target, self.config.level)


@hookimpl
def register_data_sources(register):
    """Register the ``workdir`` task source."""
    register("workdir", WorkdirSource, config_model=WorkdirConfig)
