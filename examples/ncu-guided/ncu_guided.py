"""A scripted policy whose next edit depends on a named Nsight Compute field (the ``ncu`` tool's ablation).

Plugin module for ``-p ncu_guided`` (``PYTHONPATH=examples/ncu-guided``); it registers the policy ``ncu_guided``.
On each example task (``examples/tasks``) it reads ``model.py`` to learn which task it is, writes the honest CUDA
solution of ``examples/solutions/cuda/<task>`` but, where the kernel uses a grid-stride loop (swish,
conv2d_relu), launched with ONE block (a deliberately poor starting point), compiles, verifies and asks ``ncu``.
Its next edit depends on the field ``occupancy achieved`` of ncu's report: below :data:`OCCUPANCY_THRESHOLD` percent
it restores the full grid; otherwise, or when ``ncu`` is absent (the ablated arm: the tool call fails), it keeps
what it has. Then it profiles and finishes. So ``cuda-agent ablate --leave-one-out ncu`` shows what the counters
are worth: the arm with ``ncu`` ends with the full grid (faster), the arm without keeps one block::

    PYTHONPATH=examples/ncu-guided cuda-agent -p ncu_guided ablate --tasks examples/tasks --backend cuda \\
        --policy ncu_guided --leave-one-out ncu --out /tmp/ncu-ablation
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from cuda_agent.config import PluginConfig
from cuda_agent.control import PolicyExhausted
from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.messages import Message, PolicyOutput, ToolSchema
from cuda_agent.scripted_policy import render_tool_call

REPO = Path(__file__).resolve().parents[2]
#: Below this achieved occupancy (percent of peak warps) the grid is too small: restore it.
OCCUPANCY_THRESHOLD = 25.0
#: Task -> (kernel file, the launch line of the tuned solution, the one-block line written first).
STARVED = {
    "swish": ("kernels/swish.cu", "blocks = blocks < 1 ? 1 : (blocks > 132 * 32 ? 132 * 32 : blocks);",
              "blocks = 1;  // first attempt: one block"),
    "conv2d_relu": ("kernels/conv2d_relu.cu", "if (blocks > 132 * 64) blocks = 132 * 64;",
                    "blocks = 1;  // first attempt: one block"),
}
OCCUPANCY = re.compile(r"occupancy achieved (\d+(?:\.\d+)?)%")


class NcuGuidedConfig(PluginConfig):
    """Block ``plugins.ncu_guided``."""

    solutions: Path = Field(REPO / "examples" / "solutions" / "cuda", description="Folder of the CUDA solutions.")
    tasks: Path = Field(REPO / "examples" / "tasks", description="Folder of the example tasks (to recognise model.py).")


def decide(observation: str) -> str:
    """'restore_grid' when ncu's report names an achieved occupancy below the threshold, else 'keep' (also when
    there is no report: the tool is absent or refused)."""
    found = [float(v) for v in OCCUPANCY.findall(observation)]
    return "restore_grid" if found and min(found) < OCCUPANCY_THRESHOLD else "keep"


class NcuGuidedPolicy:
    """See the module docstring."""

    def __init__(self, config: NcuGuidedConfig | None = None) -> None:
        self.config = config or NcuGuidedConfig()
        self.reset()

    def reset(self) -> None:
        """Start a new episode."""
        self.step = 0
        self.task: str | None = None
        #: What the ncu observation led to ('restore_grid' / 'keep'), for reports and tests.
        self.decision: str | None = None

    def _files(self, starved: bool) -> dict[str, str]:
        sol = self.config.solutions / str(self.task)
        files = {str(p.relative_to(sol)): p.read_text() for p in sorted(sol.rglob("*")) if p.is_file()}
        if starved and self.task in STARVED:
            rel, tuned, one_block = STARVED[self.task]
            assert tuned in files[rel], f"{rel} of {self.task} no longer has the launch line this policy edits"
            files[rel] = files[rel].replace(tuned, one_block)
        return files

    def _recognise(self, messages: list[Message]) -> None:
        seen = messages[-1].content or ""
        for path in sorted(self.config.tasks.glob("*.py")):
            if path.read_text().strip() in seen:
                self.task = path.stem
                return
        raise PolicyExhausted("ncu_guided: model.py is none of the example tasks")

    def query(self, messages: list[Message], tools: list[ToolSchema]) -> PolicyOutput:
        """The next turn (read, write, compile+verify, ncu, edit per ncu, profile, finish)."""
        start = time.monotonic()
        self.step += 1
        calls: list[tuple[str, dict[str, Any]]]
        text = ""
        if self.step == 1:
            text, calls = "Reading the reference.", [("read_file", {"path": "model.py"})]
        elif self.step == 2:
            self._recognise(messages)
            text = f"Writing a first {self.task} kernel."
            calls = [("write_file", {"path": p, "content": c}) for p, c in self._files(starved=True).items()]
            calls += [("compile", {}), ("verify", {})]
        elif self.step == 3:
            text, calls = "Reading the hardware counters.", [("ncu", {})]
        elif self.step == 4:
            self.decision = decide(messages[-1].content or "")
            if self.decision == "restore_grid":
                text = "ncu: achieved occupancy is low; launching the full grid."
                calls = [("write_file", {"path": p, "content": c}) for p, c in self._files(starved=False).items()]
                calls += [("compile", {}), ("verify", {})]
            else:
                text, calls = "Keeping the kernel as it is.", []
        elif self.step == 5:
            text, calls = "Measuring.", [("profile", {})]
        elif self.step == 6:
            text, calls = "Done.", [("finish", {"summary": f"ncu_guided: {self.decision}"})]
        else:
            raise PolicyExhausted("ncu_guided: episode over")
        out = "\n".join([text, *(render_tool_call(n, a) for n, a in calls)])
        return PolicyOutput(text=out, finish_reason="tool_calls" if calls else "stop",
                            usage={"prompt_tokens": 0, "completion_tokens": len(out.split())},
                            latency_s=time.monotonic() - start)


@hookimpl
def register_policies(register) -> None:
    """Register ``ncu_guided``."""
    register("ncu_guided", NcuGuidedPolicy, config_model=NcuGuidedConfig,
             description="Scripted CUDA episodes whose next edit depends on ncu's achieved occupancy")
