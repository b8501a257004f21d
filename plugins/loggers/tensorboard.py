"""TensorBoard and Weights & Biases metric loggers (used when their packages are installed).

``tensorboard``: scalars under ``<stage>/<metric>`` via ``torch.utils.tensorboard``
(needs the ``tensorboard`` package). ``wandb``: ``wandb.log`` with keys
``<stage>/<metric>`` (needs ``wandb`` and a login or ``WANDB_MODE=offline``).
Both are registered always; building one without its package fails with an
error naming the package to install. Both record the run's config
(``log_config``) as it arrives from :func:`cuda_agent.run_metadata.log_run_config`:
redacted, so no API key reaches an event file or a W&B project.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError
from cuda_agent.hookspecs import hookimpl


class TensorBoardLoggerConfig(BaseModel):
    """Config block ``plugins.tensorboard``."""

    model_config = ConfigDict(extra="forbid")

    log_dir: str = Field("runs/tensorboard", description="Event file folder (training sets <run_dir>/tensorboard by default).")


class TensorBoardLogger:
    """Writes each metric as a TensorBoard scalar ``<stage>/<name>`` at the step."""

    def __init__(self, config: TensorBoardLoggerConfig | None = None) -> None:
        self.config = config or TensorBoardLoggerConfig()
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:
            raise ConfigError(
                f"logger 'tensorboard' needs the 'tensorboard' package ({exc}); pip install tensorboard, "
                "or drop 'tensorboard' from 'loggers'"
            ) from exc
        self._writer = SummaryWriter(log_dir=self.config.log_dir)

    def log(self, metrics: dict[str, float], *, step: int, stage: str = "") -> None:
        """Add one scalar per metric."""
        prefix = f"{stage}/" if stage else ""
        for k, v in metrics.items():
            self._writer.add_scalar(prefix + k, float(v), step)
        self._writer.flush()

    def log_config(self, config: dict[str, Any]) -> None:
        """The resolved config (secrets already redacted) as the text ``config`` of the run."""
        import yaml

        self._writer.add_text("config", "```yaml\n" + yaml.safe_dump(config, sort_keys=False) + "```")
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


class WandbLoggerConfig(BaseModel):
    """Config block ``plugins.wandb``."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field("cuda-agent", description="W&B project.")
    name: str | None = Field(None, description="Run name; None = W&B's default.")
    mode: str | None = Field(None, description="'online', 'offline' or 'disabled'; None = W&B's default (WANDB_MODE).")


class WandbLogger:
    """Logs metrics to Weights & Biases with keys ``<stage>/<name>``."""

    def __init__(self, config: WandbLoggerConfig | None = None) -> None:
        self.config = config or WandbLoggerConfig()
        try:
            import wandb
        except ImportError as exc:
            raise ConfigError(f"logger 'wandb' needs the 'wandb' package ({exc}); pip install wandb, or drop 'wandb' from 'loggers'") from exc
        self._wandb: Any = wandb
        self._run = wandb.init(project=self.config.project, name=self.config.name, mode=self.config.mode)

    def log(self, metrics: dict[str, float], *, step: int, stage: str = "") -> None:
        """One ``wandb.log`` call per step."""
        prefix = f"{stage}/" if stage else ""
        self._run.log({prefix + k: float(v) for k, v in metrics.items()} | {f"{prefix}step": step})

    def log_config(self, config: dict[str, Any]) -> None:
        """The resolved config (secrets already redacted) as the W&B run's config."""
        self._run.config.update(config, allow_val_change=True)

    def close(self) -> None:
        """Finish the run."""
        self._run.finish()


@hookimpl
def register_loggers(register) -> None:
    """Register ``tensorboard`` and ``wandb``."""
    register("tensorboard", TensorBoardLogger, config_model=TensorBoardLoggerConfig)
    register("wandb", WandbLogger, config_model=WandbLoggerConfig)
