"""The ``profile`` tool: time ModelNew against eager PyTorch and torch.compile."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput


class ProfileArgs(BaseModel):
    """profile takes no arguments."""

    model_config = ConfigDict(extra="forbid")


class ProfileTool:
    """Run the backend's profile: verify, then time the candidate and the cached baselines."""

    name = "profile"
    description = (
        "Verify, then time ModelNew (median over repeated calls, fresh inputs, caches flushed) and compare with "
        "eager PyTorch and torch.compile on this machine; reports speedups and a per-kernel breakdown."
    )
    Args = ProfileArgs

    def run(self, args: ProfileArgs, ctx: ToolContext) -> ToolOutput:
        """Profile via ``ctx.backend.profile``."""
        if ctx.backend is None:
            return ToolOutput(content="profile is unavailable: this run has no backend", is_error=True)
        result = ctx.backend.profile(ctx.workspace, ctx.task)
        return ToolOutput(content=result.summary_for_agent(), result=result, is_error=not result.passed)


@hookimpl
def register_tools(register) -> None:
    """Register ``profile``."""
    register("profile", ProfileTool)
