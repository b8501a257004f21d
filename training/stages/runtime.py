"""What every stage driver shares: its folder, engines, loggers, the step loop with checkpoint/resume.

Resume contract: a stage folder holds ``checkpoints/step_<N>`` and, once
finished, ``outputs.json``. Re-running the same config skips finished stages
and continues an unfinished one from its newest complete checkpoint. Every
random draw of a step comes from a generator seeded by (run seed, stage,
step), and DeepSpeed restores weights and optimizer state exactly, so a
killed-and-resumed run ends with the same weights and metrics as an
uninterrupted one. Metrics of steps after the last checkpoint are logged
again on resume (the JSONL then holds both; the last line per step wins).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cuda_agent.protocols import StageContext
from cuda_agent.training.config import TrainConfig
from cuda_agent.training.engines.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from cuda_agent.training.engines.deepspeed_engine import (
    build_frozen_engine,
    build_train_engine,
    resolve_dtype,
)
from cuda_agent.training.engines.models import CriticModel, load_causal_lm

log = structlog.get_logger("cuda_agent.training")

OUTPUTS = "outputs.json"


def stable_seed(*parts: Any) -> int:
    """A 63-bit seed from the given parts (stable across processes, unlike hash())."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


class StageRuntime:
    """Folder, models, loggers and the resumable step loop of one stage run."""

    def __init__(self, stage_name: str, ctx: StageContext) -> None:
        if not isinstance(ctx.config, TrainConfig):
            raise TypeError(f"stage {stage_name!r} needs a TrainConfig in ctx.config, got {type(ctx.config).__name__}")
        self.name = stage_name
        self.ctx = ctx
        self.config: TrainConfig = ctx.config
        self.dir = Path(ctx.run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ckpt_dir = self.dir / "checkpoints"
        self._loggers: list[Any] | None = None
        self._closers: list[Callable[[], None]] = []

    # -- models ---------------------------------------------------------------
    @property
    def actor_source(self) -> str | dict[str, Any]:
        """The actor this stage starts from: the previous stage's export, else the configured model."""
        return self.ctx.inputs.get("actor") or self.config.model

    @property
    def tokenizer_dir(self) -> str | None:
        """Where tokenizer files live (kernel environment), if anywhere."""
        if self.config.tokenizer:
            return self.config.tokenizer
        return self.config.model if isinstance(self.config.model, str) else None

    def _lm(self, source: str | dict[str, Any]) -> torch.nn.Module:
        return load_causal_lm(source, dtype=torch.float32, seed=self.config.model_seed)

    def build_actor(self, lr: float) -> Any:
        """The trainable actor engine."""
        return build_train_engine(self._lm(self.actor_source), lr, self.config.engine)

    def build_critic(self, lr: float, init: str | None = None) -> Any:
        """The critic engine from ``init`` (a critic state dict file), else the previous stage's critic, else the
        actor's backbone with a fresh head."""
        critic = CriticModel(self._lm(self.actor_source))
        path = init or self.ctx.inputs.get("critic")
        if path:
            if not Path(path).is_file():
                raise FileNotFoundError(f"critic state {path} does not exist (init_critic, or the previous stage's "
                                        "'critic' output)")
            critic.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return build_train_engine(critic, lr, self.config.engine)

    def build_reference(self) -> Any:
        """The frozen reference: the initial model of the whole run (``config.model``)."""
        return build_frozen_engine(self._lm(self.config.model), self.config.engine)

    @property
    def dtype(self) -> torch.dtype:
        """Training dtype of the engines."""
        return resolve_dtype(self.config.engine)

    # -- randomness -------------------------------------------------------------
    def generator(self, step: int, purpose: str = "rollout") -> torch.Generator:
        """The CPU generator of one step's random draws on this rank."""
        return torch.Generator().manual_seed(stable_seed(self.config.seed, self.dir.name, purpose, step, self.rank))

    @property
    def rank(self) -> int:
        """This process's data-parallel rank (0 without a launcher): each rank collects its own episodes."""
        import torch.distributed as dist

        return dist.get_rank() if dist.is_initialized() else 0

    # -- metrics ----------------------------------------------------------------
    def loggers(self) -> list[Any]:
        """Logger plugins of the run (``jsonl`` defaults to ``<run_dir>/metrics.jsonl``)."""
        if self._loggers is None:
            reg = self.ctx.plugin_manager.registry
            self._loggers = []
            for name in self.config.loggers:
                block = dict(self.config.plugins.get(name, {}))
                if name == "jsonl" and "path" not in block:
                    block["path"] = str(self.dir.parent / "metrics.jsonl")
                if name == "tensorboard" and "log_dir" not in block:
                    block["log_dir"] = str(self.dir.parent / "tensorboard")
                self._loggers.append(reg.build("logger", name, block, where=f"loggers[{name}]"))
        return self._loggers

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Send a step's metrics to every logger and the ``on_train_step`` hook."""
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        if _is_rank0():
            for lg in self.loggers():
                lg.log(clean, step=step, stage=self.name)
        self.ctx.plugin_manager.on_train_step(stage=self.name, step=step, metrics=clean)

    def on_close(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when the stage closes (e.g. shut a rollout engine down), newest first."""
        self._closers.append(fn)

    def close(self) -> None:
        """Shut down what registered with :meth:`on_close`, then close loggers."""
        while self._closers:
            self._closers.pop()()
        for lg in self._loggers or []:
            lg.close()
        self._loggers = None

    # -- outputs ------------------------------------------------------------------
    def finished_outputs(self) -> dict[str, Any] | None:
        """The outputs of a finished run of this stage folder, or None."""
        p = self.dir / OUTPUTS
        return json.loads(p.read_text()) if p.exists() else None

    def write_outputs(self, outputs: dict[str, Any]) -> dict[str, Any]:
        """Mark the stage finished with its outputs (paths for the next stage)."""
        if _is_rank0():
            (self.dir / OUTPUTS).write_text(json.dumps(outputs, indent=1, sort_keys=True))
        return outputs

    # -- the loop -------------------------------------------------------------------
    def run_steps(
        self,
        steps: int,
        engines: dict[str, Any],
        step_fn: Callable[[int], dict[str, float]],
        *,
        checkpoint_every: int,
        stop_fn: Callable[[int, dict[str, float]], bool] | None = None,
    ) -> tuple[int, dict[str, float]]:
        """Run ``step_fn(step)`` for steps 1..steps with checkpoints; resume from the newest one.

        :returns: (last step run, its metrics).
        """
        start, last = 1, {}
        ckpt = latest_checkpoint(self.ckpt_dir) if self.ctx.resume else None
        if ckpt is not None:
            state = load_checkpoint(ckpt, engines)
            start, last = int(state["step"]) + 1, state.get("metrics", {})
            log.info("resumed", stage=self.name, checkpoint=str(ckpt), next_step=start)
            if state.get("stopped"):
                return int(state["step"]), last
        step = start - 1
        with Progress(TextColumn(f"[bold]{self.name}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      disable=not _is_rank0(), transient=True) as bar:
            task = bar.add_task(self.name, total=steps, completed=start - 1)
            for step in range(start, steps + 1):
                last = step_fn(step)
                self.log(step, last)
                stop = bool(stop_fn and stop_fn(step, last))
                if stop or step % checkpoint_every == 0 or step == steps:
                    save_checkpoint(self.ckpt_dir, step, engines, {"metrics": last, "stopped": stop})
                bar.advance(task)
                if stop:
                    break
        return step, last


def _is_rank0() -> bool:
    import torch.distributed as dist

    return not dist.is_initialized() or dist.get_rank() == 0
