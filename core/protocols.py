"""Protocols of the pluggable components (frozen; see docs/interfaces.md).

Every registered factory builds an object satisfying one of these. They are
``typing.Protocol`` classes: implementations need not inherit from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from cuda_agent.schemas.messages import Message, PolicyOutput, ToolSchema
from cuda_agent.schemas.result import CandidateResult
from cuda_agent.schemas.task import TaskManifest

if TYPE_CHECKING:
    from cuda_agent.plugin_manager import PluginManager


# --------------------------------------------------------------------------- workspace
@runtime_checkable
class Workspace(Protocol):
    """A folder the agent edits, confined: no path may resolve outside ``root``.

    Every state is stored content-addressed in ``store`` (:meth:`snapshot`), and :meth:`restore` rebuilds one
    into a fresh folder: the loop grades the selected state that way, and the eval runner regrades.
    Implemented by :class:`cuda_agent.harness.workspace.ConfinedWorkspace`.
    """

    root: Path
    #: Folder of the content-addressed snapshot store (manifests and blobs).
    store: Path

    def resolve(self, rel: str) -> Path:
        """Absolute path of ``rel`` inside the workspace; raises WorkspaceError on escape."""

    def read(self, rel: str) -> str: ...

    def write(self, rel: str, text: str) -> None:
        """Write a file; refuses protected files and escapes with WorkspaceError."""

    def list(self) -> list[str]:
        """Relative paths of all files, sorted."""

    def is_protected(self, rel: str) -> bool: ...

    def snapshot(self) -> str:
        """Store the current state content-addressed; return its id (``sha256:...``)."""

    def verify_protected(self) -> list[str]:
        """Relative paths of protected files whose hash changed (empty = intact)."""

    @classmethod
    def restore(cls, snapshot_id: str, store: Path, dest: Path) -> Workspace:
        """Rebuild snapshot ``snapshot_id`` of ``store`` into the empty folder ``dest``; return that workspace."""


# --------------------------------------------------------------------------- tools
class ToolOutput(BaseModel):
    """What a tool returns to the loop."""

    content: str = Field(description="Observation text (the loop truncates it to the configured limit).")
    is_error: bool = Field(False, description="The call failed; the model sees the content anyway.")
    result: CandidateResult | None = Field(None, description="Evaluation record, for compile/verify/profile.")
    submit: bool = Field(False, description="The episode ends after this call (the finish tool).")


@dataclass
class ToolContext:
    """Everything a tool may touch during one call."""

    workspace: Workspace
    task: TaskManifest
    backend: Backend | None
    run_dir: Path
    turn: int
    config: Any = None
    state: dict[str, Any] = field(default_factory=dict)  # per-episode scratch shared by tools


@runtime_checkable
class Tool(Protocol):
    """An agent tool. ``Args`` is a pydantic model; its JSON schema is what the model sees."""

    name: ClassVar[str] | str
    description: ClassVar[str] | str
    Args: ClassVar[type[BaseModel]] | type[BaseModel]

    def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutput: ...


def tool_schema(tool: Tool) -> ToolSchema:
    """The schema shown to the model, generated from the tool's argument model."""
    params = tool.Args.model_json_schema()
    params.pop("title", None)
    return ToolSchema(name=tool.name, description=tool.description, parameters=params)


# --------------------------------------------------------------------------- rewards
@runtime_checkable
class Reward(Protocol):
    """Maps the trusted graded result (and optionally per-turn results) to a scalar."""

    def score(self, graded: CandidateResult, turn_results: Sequence[CandidateResult] = ()) -> float: ...


# --------------------------------------------------------------------------- backends
@runtime_checkable
class Backend(Protocol):
    """A hardware backend: builds, verifies, profiles and grades candidates.

    ``grade`` is the trusted final pass (fresh seeds, fresh process, timing
    alternated with baselines); rewards come only from its result.
    """

    name: str
    #: Name of its skill document (registered through ``register_skills``), the system prompt's guide.
    skill: str
    #: File suffix of kernel sources the agent writes (``.cu`` / ``.cpp``).
    kernel_suffix: str

    def availability(self) -> tuple[bool, str]:
        """(usable here, reason) -- e.g. (False, 'no CUDA device visible')."""

    def device_facts(self) -> dict[str, Any]:
        """Device name, capability, driver, toolkit versions; goes into Provenance."""

    def prepare_workspace(self, task: TaskManifest, root: Path) -> Workspace:
        """Lay out a fresh workspace for ``task`` at ``root`` (release layout)."""

    def compile(self, workspace: Workspace, task: TaskManifest) -> CandidateResult: ...

    def verify(self, workspace: Workspace, task: TaskManifest) -> CandidateResult: ...

    def profile(self, workspace: Workspace, task: TaskManifest) -> CandidateResult: ...

    def grade(self, workspace: Workspace, task: TaskManifest) -> CandidateResult: ...

    def close(self) -> None:
        """Stop pre-started processes and release devices."""


@runtime_checkable
class PreparedEvaluation(Protocol):
    """A candidate built for one verify/profile/grade call, waiting for the device (see :class:`SplitBackend`)."""

    #: The build's outcome; None when it did not build (the device step then only reports why).
    outcome: Any

    def close(self) -> None:
        """Release what the build made only for this call (a from-scratch grade build folder)."""


@runtime_checkable
class SplitBackend(Protocol):
    """What a :class:`Backend` adds when its verify/profile/grade split into a host build and a device step.

    The eval scheduler builds in its CPU build pool and holds the device's timing lock only for
    :meth:`evaluate_built`; a backend without the split runs its whole call under the lock.
    """

    def build_for(self, phase: str, workspace: Workspace, task: TaskManifest) -> PreparedEvaluation:
        """Build ``workspace`` for ``phase`` ('verify', 'profile' or 'grade'); needs no device."""

    def evaluate_built(self, prepared: PreparedEvaluation) -> CandidateResult:
        """Run the device part of the call on the prepared build."""


@runtime_checkable
class WarmableBackend(Protocol):
    """A backend with host work to do for a task before its first device call (reference process, baselines)."""

    def warm(self, task: TaskManifest) -> None:
        """Start the task's reference process and compile its baselines; idempotent per task."""


# --------------------------------------------------------------------------- policies
@runtime_checkable
class Policy(Protocol):
    """The model side of the loop: full message list in, one turn out.

    Token-level policies keep the token context of the episode and return
    ``prompt_delta_ids`` per the tokenization contract; ``reset`` starts a
    new episode.
    """

    def reset(self) -> None: ...

    def query(self, messages: list[Message], tools: list[ToolSchema]) -> PolicyOutput: ...


class SamplingParams(BaseModel):
    """Sampling settings shared by policies and rollout engines."""

    max_new_tokens: int = Field(1024, description="Tokens generated at most per turn.")
    temperature: float = Field(1.0, description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(1.0, description="Nucleus sampling mass.")
    seed: int | None = Field(None, description="Sampling seed, for reproducible rollouts.")
    stop: list[str] = Field(default_factory=list, description="Stop strings.")


class Generation(BaseModel):
    """One sampled continuation from a rollout engine."""

    output_ids: list[int] = Field(description="Generated token ids.")
    logprobs: list[float] = Field(description="Log-prob of each generated token under the sampling distribution.")
    finish_reason: str = Field("stop", description="'stop' or 'length'.")


@runtime_checkable
class RolloutEngine(Protocol):
    """Token-in/token-out generation with log-probs, and weight sync for RL."""

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]: ...

    def update_weights(self, source: str | Path | dict[str, Any]) -> None:
        """Load new actor weights: an HF checkpoint folder or a state dict."""


# --------------------------------------------------------------------------- data
@runtime_checkable
class DataSource(Protocol):
    """Yields tasks (manifests with code; shapes are probed later by the harness)."""

    def iter_tasks(self) -> Iterable[TaskManifest]: ...


class FilterVerdict(BaseModel):
    """A task filter's decision."""

    keep: bool = Field(description="Keep the task.")
    reason: str | None = Field(None, description="Drop reason id, e.g. 'nondeterministic' (required when dropping).")
    message: str = Field("", description="Human-readable detail.")
    measurements: dict[str, Any] = Field(default_factory=dict, description="Numbers behind the verdict.")


@runtime_checkable
class TaskFilter(Protocol):
    """Keeps or drops one synthesized task, with a recorded reason."""

    def check(self, task: TaskManifest, backend: Backend | None) -> FilterVerdict: ...


# --------------------------------------------------------------------------- training
@dataclass
class StageContext:
    """What a trainer stage receives."""

    run_dir: Path
    config: Any
    plugin_manager: PluginManager
    inputs: dict[str, Any] = field(default_factory=dict)  # outputs of the previous stage (checkpoint paths...)
    resume: bool = True


@runtime_checkable
class Stage(Protocol):
    """A trainer stage (``ppo_single_turn``, ``rft``, ``value_pretrain``, ``ppo_agentic``)."""

    def run(self, ctx: StageContext) -> dict[str, Any]:
        """Train; return outputs for the next stage (e.g. {'actor': path, 'critic': path})."""


@runtime_checkable
class MetricLogger(Protocol):
    """Receives scalar metrics."""

    def log(self, metrics: dict[str, float], *, step: int, stage: str = "") -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class ConfigLogger(Protocol):
    """What a :class:`MetricLogger` adds when it records the run's configuration (W&B config, a TensorBoard text)."""

    def log_config(self, config: dict[str, Any]) -> None:
        """Record the resolved config; it arrives with secrets redacted (:func:`cuda_agent.run_metadata.log_run_config`)."""
