"""What every built-in stage driver does around its training: defaults, preflight, skip-if-finished, close, outputs."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from cuda_agent.protocols import StageContext
from cuda_agent.training.stages.runtime import StageRuntime
from cuda_agent.training.stages.vllm_rollout import check_rollout_engine


class StageDriver:
    """Base of the stage drivers: subclasses set ``name`` and ``config_model`` and implement :meth:`train`.

    :meth:`run` returns the saved outputs of a finished stage folder (resume),
    otherwise trains, closes what the stage opened (loggers, a rollout engine)
    whether it succeeded or not, and marks the stage finished with its outputs.
    """

    name: ClassVar[str]
    config_model: ClassVar[type[BaseModel]]

    def __init__(self, config: BaseModel | None = None) -> None:
        self.config: Any = config if config is not None else self.config_model()

    def preflight(self, where: str) -> None:
        """Refuse, before any stage of the run trains, what this stage could not run here (e.g. vLLM absent)."""
        rollout = getattr(self.config, "rollout", None)
        if rollout is not None:
            check_rollout_engine(rollout, f"{where}.rollout")

    def run(self, ctx: StageContext) -> dict[str, Any]:
        """Train (or return a finished run's outputs); the outputs hold paths for the next stage."""
        rt = StageRuntime(self.name, ctx)
        done = rt.finished_outputs() if ctx.resume else None
        if done is not None:
            return done
        try:
            outputs = self.train(rt)
        finally:
            rt.close()
        return rt.write_outputs(outputs)

    def train(self, rt: StageRuntime) -> dict[str, Any]:
        """The stage's work in ``rt.dir``; returns its outputs."""
        raise NotImplementedError
