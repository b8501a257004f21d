"""A stand-in for the W&B client library (an outside service), as its offline mode behaves for our logger.

``init(project, name, mode, config=None)`` returns a run whose ``config.update`` and ``log`` calls are written,
as W&B's offline mode writes them, to files under ``$WANDB_DIR`` (``config.yaml``, ``history.jsonl``), so a test
can search what the service would have received. Put this folder first on ``sys.path`` to use it as ``wandb``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

__version__ = "0.0-fake"


class _Config(dict):
    def __init__(self, run: _Run) -> None:
        super().__init__()
        self._run = run

    def update(self, values: dict[str, Any], allow_val_change: bool = False) -> None:  # noqa: ARG002 (W&B's signature)
        super().update(values)
        (self._run.dir / "config.yaml").write_text(yaml.safe_dump(dict(self)))


class _Run:
    def __init__(self, project: str, name: str | None, mode: str | None, config: dict[str, Any] | None) -> None:
        self.dir = Path(os.environ.get("WANDB_DIR", ".")) / "wandb" / f"offline-run-{project}-{name or 'run'}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.mode = mode
        self.config = _Config(self)
        if config:
            self.config.update(config)
        self.finished = False

    def log(self, data: dict[str, Any]) -> None:
        with (self.dir / "history.jsonl").open("a") as fh:
            fh.write(json.dumps(data) + "\n")

    def finish(self) -> None:
        self.finished = True


def init(project: str = "uncategorized", name: str | None = None, mode: str | None = None,
         config: dict[str, Any] | None = None, **_: Any) -> _Run:
    """Start an offline run writing under ``$WANDB_DIR``."""
    return _Run(project, name, mode, config)
