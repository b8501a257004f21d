"""A test backend plugin ('toy') over a real ConfinedWorkspace, plus tools that call it.

Not a mock of the loop: it is a small, real Backend implementation whose
verdicts are read from workspace files, so loop behaviour (selection,
grading, rewards) can be tested without compilers:

- compile: ``model_new.py`` must define ``class ModelNew``;
- verify: ``answer.txt`` must hold ``42``;
- profile/grade: candidate time in ms from ``speed.txt`` (eager 10 ms, compile 8 ms).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cuda_agent.harness.workspace import ConfinedWorkspace
from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput
from cuda_agent.schemas.result import Baselines, CandidateResult, Status, Timing

EAGER_MS, COMPILE_MS = 10.0, 8.0


class ToyBackend:
    """Backend 'toy'."""

    name = "toy"
    skill = "cpu"
    kernel_suffix = ".cpp"

    def __init__(self) -> None:
        self.closed = False
        self.graded_roots: list[Path] = []

    def availability(self):
        return True, "always"

    def device_facts(self):
        return {"device": "toy"}

    def prepare_workspace(self, task, root):
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        (root / "model.py").write_text(task.code)
        (root / "model_new.py").write_text("# write ModelNew here\n")
        return ConfinedWorkspace(root, protected=["model.py"])

    def _result(self, task, phase, status, message="", ms=None):
        timing = Timing(median_ms=ms, samples=3, method="toy") if ms else None
        base = Baselines(eager=Timing(median_ms=EAGER_MS, method="toy"), compile=Timing(median_ms=COMPILE_MS, method="toy")) if ms else None
        return CandidateResult(
            task_id=task.id, phase=phase, status=status, message=message, timing=timing, baselines=base,
            speedup_eager=EAGER_MS / ms if ms else None, speedup_compile=COMPILE_MS / ms if ms else None,
        )

    def compile(self, workspace, task):
        ok = "class ModelNew" in workspace.read("model_new.py")
        return self._result(task, "compile", Status.correct if ok else Status.compile_error,
                            "" if ok else "model_new.py defines no ModelNew")

    def verify(self, workspace, task):
        if self.compile(workspace, task).status is not Status.correct:
            return self._result(task, "verify", Status.compile_error)
        try:
            ok = workspace.read("answer.txt").strip() == "42"
        except Exception:
            ok = False
        return self._result(task, "verify", Status.correct if ok else Status.incorrect)

    def profile(self, workspace, task):
        v = self.verify(workspace, task)
        if v.status is not Status.correct:
            return v.model_copy(update={"phase": "profile"})
        return self._result(task, "profile", Status.correct, ms=float(workspace.read("speed.txt").strip()))

    def grade(self, workspace, task):
        self.graded_roots.append(Path(workspace.root))
        if workspace.verify_protected():
            return self._result(task, "grade", Status.rejected, "protected file changed")
        return self.profile(workspace, task).model_copy(update={"phase": "grade"})

    def close(self):
        self.closed = True


class NoArgs(BaseModel):
    """No arguments."""

    model_config = ConfigDict(extra="forbid")


class ToyVerify:
    """Verify via the backend."""

    name = "toy_verify"
    description = "Verify the workspace with the toy backend."
    Args = NoArgs

    def run(self, args, ctx: ToolContext) -> ToolOutput:
        r = ctx.backend.verify(ctx.workspace, ctx.task)
        return ToolOutput(content=r.summary_for_agent(), result=r, is_error=not r.passed)


class ToyProfile(ToyVerify):
    """Profile via the backend."""

    name = "toy_profile"
    description = "Profile the workspace with the toy backend."

    def run(self, args, ctx: ToolContext) -> ToolOutput:
        r = ctx.backend.profile(ctx.workspace, ctx.task)
        return ToolOutput(content=r.summary_for_agent(), result=r, is_error=not r.passed)


class Boom(ToyVerify):
    """A tool that raises."""

    name = "boom"
    description = "Always raises."

    def run(self, args, ctx):
        raise RuntimeError("kaboom")


@hookimpl
def register_backends(register):
    register("toy", ToyBackend)


@hookimpl
def register_tools(register):
    for t in (ToyVerify, ToyProfile, Boom):
        register(t.name, t)


