"""The ``verify`` tool: check ModelNew against the reference on fresh random inputs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput


class VerifyArgs(BaseModel):
    """verify takes no arguments."""

    model_config = ConfigDict(extra="forbid")


class VerifyTool:
    """Run the backend's verify: rebuild if needed, then compare outputs on several input sets."""

    name = "verify"
    description = (
        "Check ModelNew (model_new.py) against the reference Model on several fresh random input sets: types, "
        "shapes, dtypes, aliasing, NaN and tolerance. Rebuilds first if sources changed. Reports every mismatch."
    )
    Args = VerifyArgs

    def run(self, args: VerifyArgs, ctx: ToolContext) -> ToolOutput:
        """Verify via ``ctx.backend.verify``."""
        if ctx.backend is None:
            return ToolOutput(content="verify is unavailable: this run has no backend", is_error=True)
        result = ctx.backend.verify(ctx.workspace, ctx.task)
        return ToolOutput(content=result.summary_for_agent(), result=result, is_error=not result.passed)


@hookimpl
def register_tools(register) -> None:
    """Register ``verify``."""
    register("verify", VerifyTool)
