"""Conformance checks for plugin authors: tools and rewards (backends and skills: :mod:`cuda_agent.testing.backends`).

Each ``check_*`` raises :class:`ConformanceError` (an ``AssertionError``, so
pytest shows it as a test failure) listing every problem found, and returns
quietly when the component conforms. Call them from your own tests::

    from cuda_agent.testing import check_reward

    def test_my_reward_conforms():
        check_reward(MyReward())
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cuda_agent.errors import WorkspaceError
from cuda_agent.protocols import Backend, Reward, Tool, ToolContext, ToolOutput, tool_schema
from cuda_agent.schemas.result import Baselines, CandidateResult, Status, Timing
from cuda_agent.schemas.task import TaskManifest


class ConformanceError(AssertionError):
    """A component broke its protocol; the message lists every problem."""


def _fail_if(problems: list[str], what: str) -> None:
    if problems:
        raise ConformanceError(f"{what} does not conform:\n  - " + "\n  - ".join(problems))


# --------------------------------------------------------------------------- results
def make_result(status: str = "correct", speedup_eager: float | None = None, speedup_compile: float | None = None,
                *, phase: str = "grade", task_id: str = "conformance/task") -> CandidateResult:
    """A graded CandidateResult with consistent timings for the given speedups (eager 10 ms)."""
    timing = baselines = None
    if speedup_eager is not None:
        ms = 10.0 / speedup_eager
        timing = Timing(median_ms=ms, samples=10, method="conformance")
        compile_ms = ms * speedup_compile if speedup_compile is not None else None
        baselines = Baselines(eager=Timing(median_ms=10.0, method="conformance"),
                              compile=Timing(median_ms=compile_ms, method="conformance") if compile_ms else None)
    return CandidateResult(task_id=task_id, phase=phase, status=Status(status), timing=timing, baselines=baselines,
                           speedup_eager=speedup_eager, speedup_compile=speedup_compile)


def milestone_ladder() -> dict[str, CandidateResult]:
    """The paper's ladder, worst to best: incorrect, correct (slower), faster than eager, faster than both."""
    return {
        "incorrect": make_result("incorrect"),
        "correct": make_result("correct", 0.8, 0.7),
        "faster_than_eager": make_result("correct", 1.3, 0.95),
        "faster_than_both": make_result("correct", 1.6, 1.4),
    }


# --------------------------------------------------------------------------- rewards
def check_reward(reward: Any) -> None:
    """A reward is finite, deterministic, and monotone over the milestone ladder.

    Ladder: incorrect < correct < faster than eager < faster than both. Every
    other failing status (compile_error, rejected, error, timeout) must score
    strictly below 'correct'.
    """
    problems: list[str] = []
    if not isinstance(reward, Reward):
        _fail_if([f"{type(reward).__name__} has no score(graded, turn_results=()) method"], "reward")
    ladder = milestone_ladder()
    values: dict[str, float] = {}
    for name, result in ladder.items():
        try:
            value = reward.score(result, [])
        except Exception as exc:
            problems.append(f"score({name}) raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            problems.append(f"score({name}) = {value!r} is not a finite number")
            continue
        again = reward.score(result.model_copy(deep=True), [])
        if again != value:
            problems.append(f"score({name}) is not deterministic: {value} then {again}")
        values[name] = float(value)
    names = list(ladder)
    for lower, higher in zip(names, names[1:]):
        if lower in values and higher in values and not values[lower] < values[higher]:
            problems.append(f"not monotone: score({lower})={values[lower]} must be < score({higher})={values[higher]}")
    if "correct" in values:
        for status in ("compile_error", "rejected", "error", "timeout"):
            value = reward.score(make_result(status), [])
            if not value < values["correct"]:
                problems.append(f"score(status={status})={value} must be below score(correct)={values['correct']}")
    _fail_if(problems, f"reward {type(reward).__name__}")


# --------------------------------------------------------------------------- tools
def check_tool(tool: Any, *, example_args: Mapping[str, Any] | None = None, task: TaskManifest | None = None,
               files: Mapping[str, str] | None = None, backend: Backend | None = None) -> ToolOutput | None:
    """A tool has a name, a description and a valid JSON schema; run on a temp workspace it returns a ToolOutput.

    :param tool: a tool class (built with no arguments) or instance.
    :param example_args: arguments for a trial run (skipped when None and the Args model has required fields).
    :param files: files to place in the temp workspace before the run.
    :returns: the trial run's output, if one ran.
    """
    import jsonschema

    instance = tool() if isinstance(tool, type) else tool
    problems: list[str] = []
    name = getattr(instance, "name", None)
    if not isinstance(name, str) or not name.replace("_", "a").replace("-", "a").isalnum():
        problems.append(f"name {name!r} must be a non-empty string of letters, digits, '_' or '-'")
    if not isinstance(getattr(instance, "description", None), str) or not instance.description.strip():
        problems.append("description must be a non-empty string (the model reads it)")
    args_model = getattr(instance, "Args", None)
    if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
        problems.append(f"Args must be a pydantic BaseModel subclass, got {args_model!r}")
    if not callable(getattr(instance, "run", None)):
        problems.append("run(args, ctx) is missing")
    _fail_if(problems, f"tool {name!r}")
    schema = tool_schema(instance).parameters
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        problems.append(f"argument schema is not valid JSON schema: {exc.message}")
    if schema.get("type") != "object":
        problems.append(f"argument schema must describe an object, got type {schema.get('type')!r}")
    for field_name, field in args_model.model_fields.items():
        if not field.description:
            problems.append(f"argument {field_name!r} has no description (Field(description=...)); the model needs it")
    required = [n for n, f in args_model.model_fields.items() if f.is_required()]
    output = None
    if example_args is not None or not required:
        try:
            jsonschema.validate(dict(example_args or {}), schema)
        except jsonschema.ValidationError as exc:
            problems.append(f"example_args do not validate against the schema: {exc.message}")
        output = _trial_run(instance, dict(example_args or {}), task, files or {}, backend, problems)
    _fail_if(problems, f"tool {name!r}")
    return output


def _workspace_backend(backend: Backend | None) -> tuple[Any, bool]:
    """The backend that lays out the trial workspace: the one given, else the built-in ``cpu`` (then closed)."""
    if backend is not None:
        return backend, False
    from cuda_agent.plugin_manager import PluginManager

    return PluginManager(load_entrypoints=False).registry.build("backend", "cpu", where="conformance"), True


def _trial_run(tool: Any, args: dict[str, Any], task: TaskManifest | None, files: Mapping[str, str],
               backend: Backend | None, problems: list[str]) -> ToolOutput | None:
    task = task or TaskManifest.from_code("conformance/task", "class Model:\n    pass\n")
    layout, owned = _workspace_backend(backend)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-conformance-") as tmp:
        try:
            ws = layout.prepare_workspace(task, Path(tmp) / "workspace")
        finally:
            if owned:
                layout.close()
        for rel, text in files.items():
            path = ws.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        ctx = ToolContext(workspace=ws, task=task, backend=backend, run_dir=Path(tmp), turn=1)
        try:
            output = tool.run(tool.Args.model_validate(args), ctx)
        except WorkspaceError as exc:  # a refusal, shown to the model as an error observation by the loop
            return ToolOutput(content=str(exc), is_error=True)
        except Exception as exc:
            problems.append(f"run raised {type(exc).__name__}: {exc} (tools return errors as ToolOutput(is_error=True))")
            return None
        if not isinstance(output, ToolOutput):
            problems.append(f"run returned {type(output).__name__}, expected cuda_agent.protocols.ToolOutput")
            return None
        if ws.verify_protected():
            problems.append(f"run modified protected files: {ws.verify_protected()}")
        return output


def assert_conforms(component: Any, kind: str, **kwargs: Any) -> Any:
    """Dispatch to ``check_<kind>`` (kind: 'tool', 'reward', 'backend', 'skill')."""
    from cuda_agent.testing.backends import check_backend, check_skill

    checks = {"tool": check_tool, "reward": check_reward, "backend": check_backend, "skill": check_skill}
    if kind not in checks:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(checks)}")
    return checks[kind](component, **kwargs)


__all__: Sequence[str] = ["ConformanceError", "assert_conforms", "check_reward", "check_tool", "make_result",
                          "milestone_ladder"]
