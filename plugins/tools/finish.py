"""The ``finish`` tool: the agent declares it is done; the episode ends after this turn."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput


class FinishArgs(BaseModel):
    """Arguments of finish."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field("", description="Optional short summary of the final solution.")


class FinishTool:
    """End the episode; the harness then grades the selected workspace state."""

    name = "finish"
    description = (
        "Call when your solution is complete. The harness then re-verifies and times it with fresh inputs; "
        "no further turns follow."
    )
    Args = FinishArgs

    def run(self, args: FinishArgs, ctx: ToolContext) -> ToolOutput:
        """Mark the episode submitted."""
        return ToolOutput(content="submitted; the harness will grade your solution", submit=True)


@hookimpl
def register_tools(register) -> None:
    """Register ``finish``."""
    register("finish", FinishTool)
