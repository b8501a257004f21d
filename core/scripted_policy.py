"""A policy that replays a fixed list of actions (llm-echo's role for plugin authors).

Used by the ``scripted`` and ``replay`` policy plugins. An action is the
assistant text and/or tool calls of one turn. With ``native=False`` (the
text protocol) tool calls are rendered into the text as
``<tool_call>{json}</tool_call>`` blocks; with ``native=True`` they are
returned as native calls. When the script is exhausted, :meth:`query`
raises :class:`cuda_agent.control.PolicyExhausted` and the episode ends.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent.control import PolicyExhausted
from cuda_agent.errors import ConfigError
from cuda_agent.schemas.messages import Message, PolicyOutput, ToolCall, ToolSchema


class ScriptedCall(BaseModel):
    """One tool call of a scripted action."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Tool name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Tool arguments.")


class ScriptAction(BaseModel):
    """One turn of a script: text, tool calls, or both."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field("", description="Assistant text of the turn.")
    tool_calls: list[ScriptedCall] = Field(default_factory=list, description="Tool calls of the turn.")
    delay_s: float | None = Field(None, ge=0, description="Seconds to wait before answering (overrides the policy's delay).")


def render_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The text-protocol block for one call."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def parse_actions(raw: Any, source: str) -> list[ScriptAction]:
    """Validate a list of actions (strings or mappings); errors name the action index and ``source``."""
    if isinstance(raw, dict) and "actions" in raw:
        raw = raw["actions"]
    if not isinstance(raw, list):
        raise ConfigError(f"script {source}: expected a list of actions (or a mapping with 'actions'), got {type(raw).__name__}")
    actions = []
    for i, item in enumerate(raw):
        try:
            actions.append(ScriptAction(text=item) if isinstance(item, str) else ScriptAction.model_validate(item))
        except ValidationError as exc:
            raise ConfigError(
                f"script {source}: action {i} is invalid ({exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}); "
                "an action is a string or a mapping with keys text, tool_calls (list of {name, arguments}), delay_s"
            ) from exc
    return actions


def load_script(path: str | Path) -> list[ScriptAction]:
    """Read actions from a YAML or JSON file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"script file {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML
    except yaml.YAMLError as exc:
        raise ConfigError(f"script file {path} is not valid YAML/JSON: {exc}") from exc
    return parse_actions(raw, str(path))


class ScriptedPolicy:
    """Replays ``actions`` one per turn; raises PolicyExhausted after the last.

    :param actions: the script.
    :param native: return tool calls natively instead of rendering them into the text.
    :param delay_s: seconds to wait before each answer (to emulate a slow model).
    """

    def __init__(self, actions: list[ScriptAction], *, native: bool = False, delay_s: float = 0.0) -> None:
        self.actions = list(actions)
        self.native = native
        self.delay_s = delay_s
        self._next = 0

    def reset(self) -> None:
        """Start again from the first action."""
        self._next = 0

    def query(self, messages: list[Message], tools: list[ToolSchema]) -> PolicyOutput:
        """The next action as a PolicyOutput."""
        if self._next >= len(self.actions):
            raise PolicyExhausted(f"script exhausted after {len(self.actions)} actions")
        action = self.actions[self._next]
        self._next += 1
        start = time.monotonic()
        delay = self.delay_s if action.delay_s is None else action.delay_s
        if delay:
            time.sleep(delay)
        text = action.text
        calls = None
        if self.native:
            calls = [
                ToolCall(id=f"call_{self._next}_{i}", name=c.name, arguments=c.arguments)
                for i, c in enumerate(action.tool_calls)
            ]
        else:
            blocks = [render_tool_call(c.name, c.arguments) for c in action.tool_calls]
            text = "\n".join([text, *blocks]) if text else "\n".join(blocks)
        return PolicyOutput(
            text=text,
            tool_calls=calls,
            finish_reason="tool_calls" if action.tool_calls else "stop",
            usage={"prompt_tokens": 0, "completion_tokens": len(text.split())},
            latency_s=time.monotonic() - start,
        )
