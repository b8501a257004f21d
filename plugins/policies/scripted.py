"""``scripted`` policy: replays a YAML/JSON list of actions (``--policy scripted:FILE``)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError
from cuda_agent.hookspecs import hookimpl
from cuda_agent.scripted_policy import ScriptedPolicy, load_script, parse_actions


class ScriptedConfig(BaseModel):
    """Config of the ``scripted`` policy (block ``plugins.scripted`` or the spec)."""

    model_config = ConfigDict(extra="forbid")
    spec_target: ClassVar[str] = "target"

    target: str | None = Field(None, description="Path of a YAML/JSON file holding the list of actions.")
    actions: list[Any] | None = Field(None, description="Inline actions (instead of a file).")
    native: bool = Field(False, description="Return tool calls natively instead of as <tool_call> text blocks.")
    delay_s: float = Field(0.0, ge=0, description="Seconds to wait before each answer (emulates a slow model).")


def build_scripted(config: ScriptedConfig) -> ScriptedPolicy:
    """Build the policy from a file or inline actions."""
    if config.target is not None and config.actions is not None:
        raise ConfigError("scripted policy: give either a script file (target) or inline 'actions', not both")
    if config.target is not None:
        actions = load_script(config.target)
    elif config.actions is not None:
        actions = parse_actions(config.actions, "plugins.scripted.actions")
    else:
        raise ConfigError("scripted policy needs a script: --policy scripted:FILE.yaml or plugins.scripted.actions")
    return ScriptedPolicy(actions, native=config.native, delay_s=config.delay_s)


@hookimpl
def register_policies(register) -> None:
    """Register ``scripted``."""
    register("scripted", build_scripted, config_model=ScriptedConfig, description="Replays a YAML/JSON list of actions.")
