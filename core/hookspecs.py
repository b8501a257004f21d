"""Hook specifications of cuda-agent.

Every component (tool, reward, backend, policy, data source, task filter,
trainer stage, logger) enters through a ``register_*`` hook that receives a
``register`` callback, so the host owns naming and rejects duplicates (see
:mod:`cuda_agent.registry`). Built-ins use these same hooks.

A plugin is any object or module with functions decorated by
:data:`hookimpl`::

    from cuda_agent import hookimpl

    @hookimpl
    def register_rewards(register):
        register("my_reward", MyReward, config_model=MyRewardConfig)

``register(name, factory, *, config_model=None, description=None)``:
``factory`` is a class or callable that builds the component; it is called
with the validated config model instance when ``config_model`` is given
(``factory(config)``), else with no arguments. ``config_model`` is a pydantic
model validating the component's block ``plugins.<name>`` of the run config.

Observer hooks (``on_*``) are called with keyword arguments; their return
values are ignored. They must not raise: an exception there stops the run,
because silent observers hide bugs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from cuda_agent.registry import RegisterCallback

PROJECT_NAME = "cuda_agent"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_tools(register: RegisterCallback) -> None:
    """Register agent tools.

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.Tool`.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_rewards(register: RegisterCallback) -> None:
    """Register reward schemes mapping a graded result to a scalar.

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.Reward`.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_backends(register: RegisterCallback) -> None:
    """Register hardware backends (build, verify, profile, grade).

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.Backend`.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_policies(register: RegisterCallback) -> None:
    """Register policies (the model side of the agent loop).

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.Policy`.
        The ``--policy NAME:TARGET?k=v`` spec fills the config model: ``TARGET``
        goes to the field named by the model's ``spec_target`` class attribute
        (default ``target``), each ``k=v`` to field ``k``.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_data_sources(register: RegisterCallback) -> None:
    """Register task sources (KernelBench checkouts, JSONL files, folders...).

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.DataSource`.
        ``--tasks NAME:TARGET?k=v`` selects and configures one.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_task_filters(register: RegisterCallback) -> None:
    """Register task filters used by data synthesis (each drop has a reason).

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.TaskFilter`.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_stages(register: RegisterCallback) -> None:
    """Register trainer stages (``ppo_single_turn``, ``rft``, ...).

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.Stage`.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_loggers(register: RegisterCallback) -> None:
    """Register metric loggers (JSONL, TensorBoard, W&B...).

    :param register: ``register(name, factory, config_model=None)``; the
        factory builds an object satisfying :class:`cuda_agent.protocols.MetricLogger`.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_skills(register: RegisterCallback) -> None:
    """Register skill documents (the system prompt's guide for a backend's kernel language).

    :param register: ``register(name, factory, description=None, backend=None)``; ``factory()`` returns the
        document's text (Markdown); ``backend`` names the backend the skill belongs to (since hookspec 1.1; None:
        any backend may name it). A backend names its skill in its ``skill`` attribute, and a backend naming a
        skill registered for another backend fails the conformance kit.
    :returns: nothing; all implementations are called.
    """


@hookspec
def register_commands(register: RegisterCallback) -> None:
    """Register ``cuda-agent`` subcommands.

    :param register: ``register(name, add_parser, description=None)``; ``add_parser(subparsers)`` adds the
        command's argparse parser to ``subparsers`` and sets ``func=handler`` (``handler(args) -> int``, the exit
        status). It is called only when the command is the one being run, so import heavy modules inside it;
        ``description`` is the one-line help ``cuda-agent --help`` shows without importing them.
    :returns: nothing; all implementations are called.
    """


@hookspec
def doctor_checks() -> dict[str, dict[str, Any]]:
    """Report what this machine offers a plugin's components (``cuda-agent doctor``).

    :returns: check name -> ``{"ok": bool, "detail": str, ...}`` (more keys are printed as facts). Every
        implementation is called; the results are merged, a name given twice is an error naming both plugins.
    """


@hookspec
def on_episode_start(run_id: str, task_id: str, config: Any) -> None:
    """Called once before the first turn of an episode.

    :param run_id: the run's id (its output folder name).
    :param task_id: the task manifest id.
    :param config: the resolved :class:`cuda_agent.config.RunConfig`.
    """


@hookspec
def on_turn_end(run_id: str, turn: Any) -> None:
    """Called after each turn has been appended to the trajectory file.

    :param run_id: the run's id.
    :param turn: the :class:`cuda_agent.schemas.trajectory.TurnRecord` just written.
    """


@hookspec
def on_episode_end(run_id: str, end: Any) -> None:
    """Called once after grading, when ``result.json`` has been written.

    :param run_id: the run's id.
    :param end: the :class:`cuda_agent.schemas.trajectory.EndRecord` of the episode.
    """


@hookspec
def on_train_step(stage: str, step: int, metrics: dict[str, float]) -> None:
    """Called after each optimizer step of a trainer stage.

    :param stage: the stage's registered name.
    :param step: global step, starting at 1.
    :param metrics: the step's scalar metrics (also sent to logger plugins).
    """
