"""Task sources ``jsonl`` and ``parquet``: a dataset file with a code column.

KernelBench's exported datasets and the synthesized datasets of
``cuda-agent data`` (fields ``id``, ``code``, ...) both read this way;
parquet needs pyarrow (optional). Task ids are ``<file stem>/<id>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.task import TaskManifest


class TableSourceConfig(BaseModel):
    """Which file and which columns."""

    model_config = ConfigDict(extra="forbid")

    target: Path = Field(description="Path of the .jsonl or .parquet file.")
    code_field: str = Field("code", description="Column holding the task module source.")
    id_field: str = Field("id", description="Column holding a stable task id (row index when absent).")
    level_field: str = Field("level", description="Column holding the level, if any.")
    offset: int = Field(0, ge=0, description="Rows to skip.")
    limit: int | None = Field(None, ge=1, description="Rows to take at most; None = all.")


class TableSource:
    """Yields one task per row."""

    def __init__(self, config: TableSourceConfig) -> None:
        self.config = config

    def iter_tasks(self) -> Iterator[TaskManifest]:
        """Tasks in file order."""
        from cuda_agent.harness.evaluation.task_sources import iter_table

        c = self.config
        return iter_table(c.target, code_field=c.code_field, id_field=c.id_field, level_field=c.level_field,
                          offset=c.offset, limit=c.limit)


@hookimpl
def register_data_sources(register):
    """Register the ``jsonl`` and ``parquet`` task sources."""
    register("jsonl", TableSource, config_model=TableSourceConfig, description="Tasks from a JSONL file with a code column.")
    register("parquet", TableSource, config_model=TableSourceConfig, description="Tasks from a parquet file (needs pyarrow).")
