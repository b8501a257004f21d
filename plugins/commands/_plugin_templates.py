"""Files of the package ``cuda-agent plugin new`` writes (``{name}``, ``{module}``, ``{version}`` filled in)."""

from __future__ import annotations

PYPROJECT = '''[build-system]
requires = ["setuptools>=69", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = "A cuda-agent {kind} plugin."
requires-python = ">=3.11"
dependencies = ["cuda-agent"]

[project.entry-points.cuda_agent]
{module} = "{module}.plugin"

[tool.setuptools]
packages = ["{module}"]

[tool.setuptools.package-data]
{module} = ["SKILL.md"]
'''

README = '''# {name}

A cuda-agent {kind} plugin, written for hookspec version {version} (`{module}/plugin.py` declares it; cuda-agent
refuses it where the major version differs or the minor is older). Made by `cuda-agent plugin new`.

```bash
pip install -e .
cuda-agent plugins          # lists '{module}'
python -m pytest tests      # cuda-agent's conformance kit (cuda_agent.testing), as your CI should run it
```
'''

BACKEND_PLUGIN = '''"""Entry point of {name}: the backend ``{module}`` and its skill (see cuda-agent's docs/backends.md)."""

from __future__ import annotations

from importlib import resources

from cuda_agent.harness.device_backend import BackendConfig, DeviceBackend
from cuda_agent.hookspecs import hookimpl

from {module}.adapter import Adapter

#: The hookspec version this plugin was written for.
CUDA_AGENT_HOOKSPEC_VERSION = "{version}"


class Backend(DeviceBackend):
    """The backend: cuda-agent's DeviceBackend over this package's adapter."""

    adapter = Adapter()


@hookimpl
def register_backends(register) -> None:
    """Register backend ``{module}``."""
    register("{module}", Backend, config_model=BackendConfig)


@hookimpl
def register_skills(register) -> None:
    """Register skill ``{module}`` for backend ``{module}``."""
    register("{module}", lambda: resources.files("{module}").joinpath("SKILL.md").read_text(encoding="utf-8"),
             backend="{module}")
'''

BACKEND_ADAPTER = '''"""The host side of backend ``{module}`` (cuda-agent's DeviceAdapter protocol: docs/backends.md).

TODO: your language. As written, a workspace is ``model.py`` (protected) + ``model_new.py`` calling the module
``{module}_kernels`` (your runtime: a JIT, a built library); the "build" checks that model_new.py compiles and
the static rules are cuda-agent's own ``model_new.py`` allowlist with that module as the extension.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cuda_agent.harness.build import BuildOutcome
from cuda_agent.harness.integrity import check_model_new_source
from cuda_agent.harness.single_file_integrity import SingleFileCheck
from cuda_agent.harness.workspace import ConfinedWorkspace

RUNTIME = "{module}_kernels"


class Adapter:
    """TODO: what runs where."""

    name = "{module}"
    skill = "{module}"
    kernel_suffix = ".py"
    device_kind = "cuda"          # or "cpu": the torch device your kernels run on
    language = "TODO"
    runner_loader = "{module}.runner:Loader"

    def availability(self, config: Any) -> tuple[bool, str]:
        """TODO: check your toolchain and device."""
        import torch

        return (torch.cuda.is_available(), "a CUDA device" if torch.cuda.is_available() else "no CUDA device")

    def device_facts(self, config: Any) -> dict[str, Any]:
        """TODO: versions of your toolchain."""
        return {{"language": self.language}}

    def task_for(self, task: Any, config: Any) -> Any:
        """The task as evaluated (a smaller variant on a CPU device, if you like)."""
        return task

    def layout(self, task: Any, root: Path) -> ConfinedWorkspace:
        """model.py (protected) and a starter model_new.py."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        (root / "model.py").write_text(task.code)
        (root / "model_new.py").write_text(f"import torch\\nimport torch.nn as nn\\n\\nimport {{RUNTIME}}\\n\\n\\n"
                                           "class ModelNew(nn.Module):\\n    def forward(self, x):\\n"
                                           "        raise NotImplementedError\\n")
        return ConfinedWorkspace(root, protected=("model.py",))

    def build(self, root: Path, build_dir: Path, config: Any, hidden: tuple[Path, ...]) -> BuildOutcome:
        """TODO: build ahead of the run if your language needs it (sandbox your compiler)."""
        started = time.perf_counter()
        try:
            compile((Path(root) / "model_new.py").read_text(), "model_new.py", "exec")
        except SyntaxError as exc:
            return BuildOutcome(ok=False, log=f"model_new.py:{{exc.lineno}}: {{exc.msg}}",
                                errors=[{{"file": "model_new.py", "line": exc.lineno, "message": exc.msg}}])
        return BuildOutcome(ok=True, duration_s=time.perf_counter() - started)

    def check_sources(self, root: Path) -> list[Any]:
        """cuda-agent's allowlist for model_new.py, with your runtime as the extension; TODO: your language's rules."""
        return check_model_new_source((Path(root) / "model_new.py").read_text(), "model_new.py",
                                      extension_names=(RUNTIME,))

    def check_binary(self, outcome: BuildOutcome) -> list[Any]:
        """TODO: rules over what build() made."""
        return []

    def check_single_file(self, source: str, filename: str) -> SingleFileCheck:
        """KernelBench's single-file form in your language."""
        return SingleFileCheck(violations=check_model_new_source(source, filename, extension_names=(RUNTIME,)))

    def kernel_names(self, root: Path, outcome: BuildOutcome | None) -> list[str]:
        """TODO: your kernels' names (Nsight Compute's filter, the sanitizer's)."""
        return []
'''

BACKEND_RUNNER = '''"""The sandbox side of backend ``{module}`` (cuda-agent's RunnerLoader protocol, imported inside the sandbox)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


class Loader:
    """TODO: make your runtime ready before the guard's snapshot; judge which GPU kernels are the candidate's."""

    def prepare(self, device: str) -> None:
        """Environment, imports, a first launch of your runtime."""

    def load(self, workspace: Path, artifacts: Path, required: bool) -> Path | None:
        """Import what build() made (staged in ``artifacts``) before model_new.py."""
        return None

    def kernel_origin_violations(self, kernel_names: Iterable[str], workspace: Path, binary: Path | None) -> list[Any]:
        """GPU kernels that ran but are not the candidate's (T1.runtime.foreign_kernel)."""
        return []
'''

SKILL = '''# Skill: writing {module} kernels in a cuda-agent workspace

TODO: the workspace, how a kernel is written and launched, the tools, what is forbidden, how to make it fast.
'''

BACKEND_TEST = '''"""{name} through cuda-agent's conformance kit (run it in your CI)."""

from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.testing import check_adapter, check_backend, check_skill

from {module} import plugin
from {module}.plugin import Backend

#: The plugin registered explicitly (installed or not): the tests do not depend on what else is installed.
PM = PluginManager(load_entrypoints=False, extra_plugins=[("{module}", plugin)])

TASK = TaskManifest.from_code("example/relu", "import torch\\nimport torch.nn as nn\\n\\n\\nclass Model(nn.Module):\\n"
                              "    def forward(self, x):\\n        return torch.relu(x)\\n\\n\\n"
                              "def get_inputs():\\n    return [torch.randn(8, 8)]\\n\\n\\n"
                              "def get_init_inputs():\\n    return []\\n")


def test_adapter_conforms():
    check_adapter(Backend.adapter)


def test_skill_conforms():
    check_skill(Backend(), PM)


def test_backend_conforms():
    check_backend(Backend(), TASK, plugin_manager=PM)  # add solution=..., evaluate=True, cheats=... once kernels run
'''

REWARD_PLUGIN = '''"""Entry point of {name}: the reward ``{module}``."""

from __future__ import annotations

from cuda_agent.hookspecs import hookimpl

#: The hookspec version this plugin was written for.
CUDA_AGENT_HOOKSPEC_VERSION = "{version}"


class Reward:
    """TODO: map the trusted graded result to a scalar."""

    def score(self, graded, turn_results=()):
        if not graded.passed:
            return -1.0
        return 1.0 + min(graded.speedup_eager or 0.0, 10.0)


@hookimpl
def register_rewards(register) -> None:
    """Register reward ``{module}``."""
    register("{module}", Reward)
'''

REWARD_TEST = '''"""{name} through cuda-agent's conformance kit."""

from cuda_agent.testing import check_reward

from {module}.plugin import Reward


def test_reward_conforms():
    check_reward(Reward())
'''

TOOL_PLUGIN = '''"""Entry point of {name}: the tool ``{module}`` (opt-in: runs name it in ``extra_tools``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput

#: The hookspec version this plugin was written for.
CUDA_AGENT_HOOKSPEC_VERSION = "{version}"


class Args(BaseModel):
    path: str = Field(description="Workspace file to read, e.g. 'model_new.py'.")


class Tool:
    """TODO: what the model gets from it."""

    name = "{module}"
    description = "TODO: one paragraph the model reads."
    Args = Args

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=f"{{args.path}}: {{len(ctx.workspace.read(args.path).splitlines())}} lines")


@hookimpl
def register_tools(register) -> None:
    """Register tool ``{module}``."""
    register("{module}", Tool)
'''

TOOL_TEST = '''"""{name} through cuda-agent's conformance kit."""

from cuda_agent.testing import check_tool

from {module}.plugin import Tool


def test_tool_conforms():
    check_tool(Tool, example_args={{"path": "model.py"}})
'''

#: kind -> relative path -> template.
FILES: dict[str, dict[str, str]] = {
    "backend": {"{module}/plugin.py": BACKEND_PLUGIN, "{module}/adapter.py": BACKEND_ADAPTER,
                "{module}/runner.py": BACKEND_RUNNER, "{module}/SKILL.md": SKILL, "tests/test_conformance.py": BACKEND_TEST},
    "reward": {"{module}/plugin.py": REWARD_PLUGIN, "tests/test_conformance.py": REWARD_TEST},
    "tool": {"{module}/plugin.py": TOOL_PLUGIN, "tests/test_conformance.py": TOOL_TEST},
}
