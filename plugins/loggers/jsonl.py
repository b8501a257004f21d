"""JSONL metric logger: one line per logged step, flushed at once."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl


class JsonlLoggerConfig(BaseModel):
    """Config block ``plugins.jsonl``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field("metrics.jsonl", description="Output file; relative paths are relative to the working directory.")


class JsonlLogger:
    """Appends ``{"time", "stage", "step", **metrics}`` lines to a file."""

    def __init__(self, config: JsonlLoggerConfig | None = None) -> None:
        self.config = config or JsonlLoggerConfig()
        self.path = Path(self.config.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")

    def log(self, metrics: dict[str, float], *, step: int, stage: str = "") -> None:
        """Write one line."""
        record = {"time": time.time(), "stage": stage, "step": step, **{k: float(v) for k, v in metrics.items()}}
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        if not self._fh.closed:
            self._fh.close()


@hookimpl
def register_loggers(register) -> None:
    """Register ``jsonl``."""
    register("jsonl", JsonlLogger, config_model=JsonlLoggerConfig)
