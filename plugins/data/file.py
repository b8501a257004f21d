"""Task source ``file``: a single KernelBench-format ``.py`` task file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.task import TaskManifest


class FileConfig(BaseModel):
    """Which file."""

    model_config = ConfigDict(extra="forbid")

    target: Path = Field(description="Path of the task .py file.")
    id: str | None = Field(None, description="Task id; None = 'file/<stem>'.")
    level: int | None = Field(None, description="Level; None = a '# level: N' comment in the file, if any.")
    probe: bool = Field(False, description="Probe the task (shapes, dtypes, input domains) in a sandbox, as `run` does.")


class FileSource:
    """Yields the one task."""

    def __init__(self, config: FileConfig) -> None:
        self.config = config

    def iter_tasks(self) -> Iterator[TaskManifest]:
        """The file's task."""
        from cuda_agent.harness.evaluation.task_sources import iter_file

        return iter_file(self.config.target, self.config.id, self.config.level, probe=self.config.probe)


@hookimpl
def register_data_sources(register):
    """Register the ``file`` task source."""
    register("file", FileSource, config_model=FileConfig)
