"""``replay`` policy: a saved trajectory.jsonl becomes a scripted policy (``--policy replay:RUN``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError
from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.trajectory import load_trajectory
from cuda_agent.scripted_policy import ScriptAction, ScriptedCall, ScriptedPolicy


class ReplayConfig(BaseModel):
    """Config of the ``replay`` policy."""

    model_config = ConfigDict(extra="forbid")
    spec_target: ClassVar[str] = "target"

    target: str = Field(description="A trajectory.jsonl file or a run folder containing one.")
    native: bool = Field(False, description="Replay tool calls natively (for runs made with tool_protocol=native).")
    max_turns: int | None = Field(None, ge=1, description="Replay only the first N turns.")


def build_replay(config: ReplayConfig) -> ScriptedPolicy:
    """Load the trajectory's turns as scripted actions (text as recorded; native calls when asked)."""
    path = Path(config.target)
    if path.is_dir():
        path = path / "trajectory.jsonl"
    if not path.is_file():
        raise ConfigError(f"replay policy: no trajectory at {path} (give a trajectory.jsonl or a run folder)")
    traj = load_trajectory(path)
    turns = traj.turns[: config.max_turns] if config.max_turns else traj.turns
    actions = [
        ScriptAction(
            text=t.text,
            tool_calls=[ScriptedCall(name=c.name, arguments=c.arguments) for c in t.tool_calls] if config.native else [],
        )
        for t in turns
    ]
    return ScriptedPolicy(actions, native=config.native)


@hookimpl
def register_policies(register) -> None:
    """Register ``replay``."""
    register("replay", build_replay, config_model=ReplayConfig, description="Replays the turns of a saved trajectory.")
