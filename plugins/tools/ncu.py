"""The ``ncu`` tool: Nsight Compute hardware counters of the candidate's kernels, as a short summary.

Registered only where ``ncu`` is installed (a CPU machine never offers it), so ``cuda-agent ablate
--leave-one-out ncu`` compares runs with and without it. On a backend whose kernels run on the CPU, or where the
counters cannot be read (``ERR_NVGPUCTRPERM`` as the sandbox's unprivileged user), it refuses with the reason. The
profile runs in the sandbox under the device's lock, clocks as when timed (harness/ncu_profile.py).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.config import PluginConfig
from cuda_agent.harness.ncu_profile import NcuRefused, count_tokens, ncu_path, summarize
from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput


class NcuConfig(PluginConfig):
    """Block ``plugins.ncu``."""

    time_limit_s: float = Field(
        300.0, gt=0, description="Seconds one profile may take: ncu replays each kernel once per group of counters, "
        "saving and restoring the memory it writes (gigabytes for KernelBench level 1 at full size); measure it on "
        "level1/19_ReLU at full size on the target GPU and set it above that.")
    max_kernels: int = Field(4, ge=1, le=32, description="Kernel launches profiled at most (the first ones of the call).")
    max_tokens: int = Field(400, ge=50, description="Tokens the summary may take (harness.ncu_profile.count_tokens).")


class NcuArgs(BaseModel):
    """ncu takes no arguments."""

    model_config = ConfigDict(extra="forbid")


class NcuTool:
    """Hardware counters of your kernels on one input set (Nsight Compute)."""

    name = "ncu"
    description = (
        "Profile your kernels with Nsight Compute on one input set: per kernel launch the time, the limiting unit, "
        "SM/DRAM/L2/L1 throughput as % of peak, achieved vs theoretical occupancy, registers per thread, shared "
        "memory per block and the top warp stall reasons. Rebuilds first if sources changed. Slow (kernels are "
        "replayed): use it to decide what to optimise next."
    )
    Args = NcuArgs

    def __init__(self, config: NcuConfig | None = None) -> None:
        self.config = config or NcuConfig()

    def run(self, args: NcuArgs, ctx: ToolContext) -> ToolOutput:
        """Counters via ``ctx.backend.counters``; a refusal is an error observation with its reason."""
        counters = getattr(ctx.backend, "counters", None)
        if counters is None:
            return ToolOutput(content="ncu is unavailable: this run's backend cannot profile hardware counters",
                              is_error=True)
        try:
            found = counters(ctx.workspace, ctx.task, time_limit_s=self.config.time_limit_s,
                             max_kernels=self.config.max_kernels)
        except NcuRefused as exc:
            return ToolOutput(content=f"ncu refused: {exc}", is_error=True)
        if not isinstance(found, list):  # the workspace did not build: the build's result
            return ToolOutput(content=found.summary_for_agent(), result=found, is_error=True)
        text = summarize(found, self.config.max_tokens)
        ctx.state.setdefault("ncu_tokens", []).append(count_tokens(text))
        return ToolOutput(content=text)


@hookimpl
def register_tools(register) -> None:
    """Register ``ncu`` where Nsight Compute is installed."""
    if ncu_path() is not None:
        register("ncu", NcuTool, config_model=NcuConfig)
