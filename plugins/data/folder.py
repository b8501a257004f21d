"""Task source ``folder``: every public ``*.py`` task file of a folder (e.g. ``examples/tasks``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.task import TaskManifest


class FolderConfig(BaseModel):
    """Which folder, and how to name its tasks."""

    model_config = ConfigDict(extra="forbid")

    target: Path = Field(description="Folder of KernelBench-format task files.")
    prefix: str | None = Field(None, description="Task id prefix; None = the folder's name ('tasks/relu').")
    level: int | None = Field(None, description="Level for every task; None = a '# level: N' comment in the file, if any.")


class FolderSource:
    """Yields the folder's tasks sorted by file name."""

    def __init__(self, config: FolderConfig) -> None:
        self.config = config

    def iter_tasks(self) -> Iterator[TaskManifest]:
        """Tasks with ids '<prefix>/<stem>'."""
        from cuda_agent.harness.evaluation.task_sources import iter_folder

        return iter_folder(self.config.target, self.config.prefix, self.config.level)


@hookimpl
def register_data_sources(register):
    """Register the ``folder`` task source."""
    register("folder", FolderSource, config_model=FolderConfig)
