"""Chat messages, tool calls and what a policy returns for one turn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ToolCall(BaseModel):
    """A tool call proposed by the model (native function call or parsed text)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Call id; native ids are kept, text-protocol calls get 'call_<turn>_<i>'.")
    name: str = Field(description="Tool name as the model wrote it (validated by the loop, not here).")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Parsed JSON arguments.")


class ToolSchema(BaseModel):
    """A tool as the model sees it (OpenAI function-tool shape)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Tool name.")
    description: str = Field(description="What the tool does, for the model.")
    parameters: dict[str, Any] = Field(description="JSON schema of the arguments (from the tool's pydantic model).")

    def openai(self) -> dict[str, Any]:
        return {"type": "function", "function": self.model_dump()}


class Message(BaseModel):
    """One chat message. ``tool`` messages carry observations."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"] = Field(description="Chat role.")
    content: str = Field("", description="Text content.")
    tool_calls: list[ToolCall] | None = Field(None, description="Native tool calls of an assistant message.")
    tool_call_id: str | None = Field(None, description="For role 'tool': the call this observes.")
    name: str | None = Field(None, description="For role 'tool': the tool name.")


class PolicyOutput(BaseModel):
    """What a policy returns for one turn.

    Token-level policies (``hf``, ``vllm``) fill ``prompt_delta_ids`` (tokens
    appended to the context since the previous generation: the rendered
    observations plus the generation prompt), ``output_ids`` and
    ``output_logprobs``; chat-API policies leave them ``None`` and report
    ``usage`` only.
    """

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The model's raw output text.")
    tool_calls: list[ToolCall] | None = Field(None, description="Native tool calls, when the policy speaks them.")
    prompt_delta_ids: list[int] | None = Field(None, description="Context tokens added before this generation.")
    output_ids: list[int] | None = Field(None, description="Generated token ids.")
    output_logprobs: list[float] | None = Field(None, description="Sampling log-prob of each generated token.")
    finish_reason: str | None = Field(None, description="'stop', 'length', 'tool_calls'...")
    usage: dict[str, int] = Field(default_factory=dict, description="prompt_tokens, completion_tokens.")
    latency_s: float | None = Field(None, description="Wall time of the generation.")
