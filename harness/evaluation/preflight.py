"""What ``cuda-agent eval`` checks before it writes anything, and the task list it plans from.

:func:`preflight` refuses, with the reason and what is valid, before the output folder exists: an unknown
policy, backend, reward or tool, a bad spec parameter or ``plugins.<name>`` block, a task source that yields
nothing (a wrong ``--tasks`` path), and a backend that is not usable on this machine. A corrected command then
starts cleanly instead of meeting a half-written folder.
"""

from __future__ import annotations

import inspect
from typing import Any

import structlog

from cuda_agent.components import check_components
from cuda_agent.errors import ConfigError
from cuda_agent.harness.evaluation.config import EvalConfig
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.specs import parse_tasks_spec

log = structlog.get_logger(__name__)


def list_tasks(config: EvalConfig, pm: PluginManager) -> list[TaskManifest]:
    """The tasks of ``eval.tasks`` from its data source (unprobed), cut to ``eval.limit``."""
    if not config.eval.tasks:
        raise ConfigError("no tasks given: pass --tasks SPEC (e.g. folder:examples/tasks) or set eval.tasks")
    spec = parse_tasks_spec(config.eval.tasks, set(pm.registry.names("data_source")))
    block = {**config.plugins.get(spec.name, {}), **spec.config()}
    source = pm.registry.build("data_source", spec.name, block, where="eval.tasks")
    tasks = list(source.iter_tasks())
    if config.eval.limit is not None:
        tasks = tasks[: config.eval.limit]
    if not tasks:
        raise ConfigError(f"task source {config.eval.tasks!r} yielded no tasks")
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"task source {config.eval.tasks!r} yields duplicate ids: {', '.join(dupes)}")
    return tasks


def check_backend_usable(config: EvalConfig, pm: PluginManager) -> None:
    """Build the backend once and ask it whether it runs here (no device work is started)."""
    backend = pm.registry.build("backend", config.backend, config.plugins.get(config.backend), where="backend")
    try:
        usable, reason = backend.availability()
    finally:
        backend.close()
    if not usable:
        raise ConfigError(f"backend {config.backend!r} is not usable here: {reason}; "
                          f"'cuda-agent doctor' shows what this machine offers")


def preflight(config: EvalConfig, pm: PluginManager) -> list[TaskManifest]:
    """Check everything :mod:`this module <.preflight>` lists; return the listed (unprobed) tasks."""
    tasks = list_tasks(config, pm)
    check_components(config.run_config(0, tasks[0]), pm)  # the policy spec's task placeholders filled
    check_backend_usable(config, pm)
    return tasks


def probe_task(task: TaskManifest, backend: str) -> TaskManifest:
    """Fill shapes, dtypes and domains with the harness probe; a failing probe is recorded in ``meta['probe_error']``."""
    try:
        from cuda_agent.harness.tasks import load_task_code
    except ImportError:
        log.warning("cuda_agent.harness.tasks is not available; tasks run unprobed", task=task.id)
        return task
    params = inspect.signature(load_task_code).parameters
    kwargs: dict[str, Any] = {"source": task.source, "level": task.level}
    for key in ("kind", "backend"):
        if key in params:
            kwargs[key] = backend
    kwargs = {k: v for k, v in kwargs.items() if k in params}
    try:
        probed = load_task_code(task.code, task.id, **kwargs)
    except Exception as exc:  # one broken task must not stop an evaluation of hundreds
        log.error("task probe failed", task=task.id, error=str(exc))
        return task.model_copy(update={"meta": {**task.meta, "probe_error": f"{type(exc).__name__}: {exc}"}})
    return probed.model_copy(update={"meta": {**task.meta, **probed.meta}, "name": task.name, "upstream": task.upstream})
