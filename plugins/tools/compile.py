"""The ``compile`` tool: build the workspace's kernels into ``cuda_extension`` (incremental)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput


class CompileArgs(BaseModel):
    """compile takes no arguments."""

    model_config = ConfigDict(extra="forbid")


class CompileTool:
    """Run the backend's compile: integrity source rules, incremental build, binary rules."""

    name = "compile"
    description = (
        "Compile kernels/ and the bindings into the module cuda_extension (incremental: only changed files "
        "are recompiled). Reports the first compiler errors with file:line, or integrity rule violations."
    )
    Args = CompileArgs

    def run(self, args: CompileArgs, ctx: ToolContext) -> ToolOutput:
        """Compile via ``ctx.backend.compile``."""
        if ctx.backend is None:
            return ToolOutput(content="compile is unavailable: this run has no backend", is_error=True)
        result = ctx.backend.compile(ctx.workspace, ctx.task)
        return ToolOutput(content=result.summary_for_agent(), result=result, is_error=not result.passed)


@hookimpl
def register_tools(register) -> None:
    """Register ``compile``."""
    register("compile", CompileTool)
