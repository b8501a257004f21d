"""The agent loop: one episode of policy -> tool calls -> observations, then trusted grading.

:func:`run_episode` serves ``cuda-agent run``, ``eval`` and RL rollouts alike.
Control flow is by exceptions (:mod:`cuda_agent.control`); the trajectory is
appended and fsynced after every turn; at the end the selected workspace
state is restored into a fresh folder, graded by ``backend.grade``, rewarded
by the configured reward plugin, and ``result.json`` is written.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from cuda_agent.components import Components, build_components
from cuda_agent.config import RunConfig, resolved
from cuda_agent.control import AgentControl, FormatError, LimitsExceeded, PolicyExhausted, Submitted
from cuda_agent.errors import ConfigError, WorkspaceError
from cuda_agent.interrupts import EpisodeInterrupted, StopRequest
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.prompts import render_system_prompt, render_task_prompt
from cuda_agent.protocols import ToolContext
from cuda_agent.provenance import stamp_from_header
from cuda_agent.run_metadata import write_json, write_run_metadata
from cuda_agent.schemas.messages import Message, PolicyOutput, ToolCall
from cuda_agent.schemas.result import CandidateResult, Status
from cuda_agent.schemas.task import TaskManifest
from cuda_agent.schemas.trajectory import EndRecord, HeaderRecord, Observation, TurnRecord, TurnTokens, append_record
from cuda_agent.selection import select_snapshot
from cuda_agent.single_turn import parse_solution_files
from cuda_agent.toolcalls import EXAMPLE, parse_tool_calls

log = structlog.get_logger("cuda_agent.loop")
TRUNCATION_MARKER = "\n[... output truncated by the harness: {n} more characters ...]"


class PolicyFailure(Exception):
    """The policy raised during ``query`` (network, model, bug): the episode ends with exit 'policy_error'."""


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped."""
    return text if len(text) <= limit else text[:limit] + TRUNCATION_MARKER.format(n=len(text) - limit)


def run_episode(
    task: TaskManifest,
    *,
    config: RunConfig,
    plugin_manager: PluginManager,
    out_dir: Path,
    policy: Any = None,
    backend: Any = None,
    stop: StopRequest | None = None,
) -> EndRecord:
    """Run one episode of ``task`` into ``out_dir``; return its end record (also in result.json).

    :param stop: checked before every policy query and tool call, and before grading: once set, the episode
        raises :class:`~cuda_agent.interrupts.EpisodeInterrupted` there, ungraded and without ``result.json``.
    """
    components = build_components(config, plugin_manager, policy=policy, backend=backend)
    usable, reason = components.backend.availability()
    if not usable:
        if backend is None:
            components.backend.close()
        raise ConfigError(f"backend {components.backend.name!r} is not usable here: {reason}; "
                          f"'cuda-agent doctor' shows what this machine offers")
    episode = Episode(task, config, plugin_manager, Path(out_dir), components, stop)
    try:
        return episode.run()
    finally:
        if backend is None:
            components.backend.close()


class Episode:
    """State of one episode; :meth:`run` is the whole loop."""

    def __init__(self, task: TaskManifest, config: RunConfig, pm: PluginManager, out_dir: Path, c: Components,
                 stop: StopRequest | None = None) -> None:
        self.task, self.config, self.pm, self.out_dir, self.c = task, config, pm, out_dir, c
        self.stop = stop
        self.agent = config.agent
        self.run_id = out_dir.name
        self.results: list[CandidateResult] = []
        self.usage: dict[str, int] = {}
        self.generated_tokens = 0
        self.turn = 0
        self.state: dict[str, Any] = {}

    # -- the loop --------------------------------------------------------------
    def run(self) -> EndRecord:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.start = time.monotonic()
        self.ws = self.c.backend.prepare_workspace(self.task, self.out_dir / "workspace")
        self.initial_snapshot = self.ws.snapshot()
        plugins = [p.as_dict() for p in self.pm.plugins()]
        versions = write_run_metadata(self.out_dir, self.config, plugins)
        header = self.header(plugins, versions)
        self.stamp = stamp_from_header(header)  # config hash, plugins, system prompt hash: on every result
        self.messages = [Message(role="system", content=header.system_prompt), Message(role="user", content=header.task_prompt)]
        exit, message = "error", ""
        with (self.out_dir / "trajectory.jsonl").open("a", encoding="utf-8") as fh:
            self.fh = fh
            append_record(fh, header)
            self.pm.on_episode_start(run_id=self.run_id, task_id=self.task.id, config=self.config)
            self.c.policy.reset()
            try:
                while True:
                    self.step()
            except Submitted as exc:
                exit, message = "submitted", exc.message
            except LimitsExceeded as exc:
                exit, message = exc.exit, exc.message
            except PolicyExhausted as exc:
                exit, message = "policy_exhausted", exc.message
            except PolicyFailure as exc:
                exit, message = "policy_error", str(exc)
                log.error("policy failed", run_id=self.run_id, error=str(exc))
            except EpisodeInterrupted:
                raise
            except Exception as exc:  # a harness bug mid-episode: record it, still grade, keep eval going
                exit, message = "error", f"{type(exc).__name__}: {exc}"
                log.exception("episode failed", run_id=self.run_id, turn=self.turn)
            end = self.finish(exit, message)
            append_record(fh, end)
        write_json(self.out_dir / "result.json", end.model_dump(mode="json"))
        self.pm.on_episode_end(run_id=self.run_id, end=end)
        log.info("episode ended", run_id=self.run_id, exit=exit, turns=self.turn, reward=end.reward)
        return end

    def header(self, plugins: list[dict[str, Any]], versions: dict[str, str]) -> HeaderRecord:
        backend, mode = self.c.backend, self.agent.mode
        variables = dict(
            skill=self.pm.skill_text(backend.skill) if self.agent.use_skill else "",
            tools=self.c.schemas, protocol=self.agent.tool_protocol, mode=mode, task=self.task,
            kernel_suffix=backend.kernel_suffix,
        )
        return HeaderRecord(
            run_id=self.run_id, task_id=self.task.id, task_code_hash=self.task.code_hash,
            policy=str(self.c.policy_spec), backend=backend.name, mode=mode,
            system_prompt=render_system_prompt(self.agent.system_prompt_template, **variables),
            task_prompt=render_task_prompt(**variables),
            system_prompt_ids=[] if getattr(self.c.policy, "token_level", False) else None,
            tools=[s.model_dump() for s in self.c.schemas], config=resolved(self.config), plugins=plugins,
            versions=versions, started_at=datetime.now(timezone.utc).isoformat(),
        )

    def check_stop(self, where: str) -> None:
        """Raise :class:`EpisodeInterrupted` when a stop was requested (at a tool boundary)."""
        if self.stop is not None and self.stop.is_set():
            raise EpisodeInterrupted(f"{self.run_id}: stopped on request {where} (turn {self.turn})")

    def step(self) -> None:
        """One turn: limits, query, tool calls, observations, record."""
        self.check_stop("before the policy's next turn")
        if self.turn >= self.agent.max_turns:
            raise LimitsExceeded("max_turns", f"reached agent.max_turns={self.agent.max_turns}")
        if self.agent.wall_clock_s is not None and time.monotonic() - self.start > self.agent.wall_clock_s:
            raise LimitsExceeded("wall_clock", f"episode ran past agent.wall_clock_s={self.agent.wall_clock_s}")
        t0 = time.monotonic()
        try:
            out = self.c.policy.query(list(self.messages), self.c.schemas)
        except AgentControl:
            raise
        except Exception as exc:
            raise PolicyFailure(f"policy.query raised {type(exc).__name__}: {exc}") from exc
        self.turn += 1  # a turn counts once the policy has answered
        record = TurnRecord(turn=self.turn, text=out.text, tokens=self.turn_tokens(out), usage=dict(out.usage))
        record.timings["policy_s"] = time.monotonic() - t0
        native = self.agent.tool_protocol == "native"
        self.messages.append(Message(role="assistant", content=out.text, tool_calls=out.tool_calls if native else None))
        t1 = time.monotonic()
        control: AgentControl | None = None
        if self.agent.mode == "single_turn":
            self.single_turn(out.text, record)
            control = Submitted("single-turn solution evaluated")
        else:
            calls, errors = (list(out.tool_calls or []), []) if native else parse_tool_calls(out.text, self.turn)
            if not calls and not errors:
                errors = [FormatError(f"no tool call found in your reply; call tools as {EXAMPLE}" if not native else
                                      "no tool call found in your reply; call one of the offered tools").message]
            for error in errors:
                self.observe(record, Observation(name="format_error", content=error, is_error=True))
            for call in calls:
                self.check_stop(f"before tool {call.name}")
                record.tool_calls.append(call)
                obs, submitted = self.execute(call, record)
                self.observe(record, obs)
                if submitted:
                    control = Submitted("finish called")
        record.timings["tools_s"] = time.monotonic() - t1
        record.snapshot_id = self.ws.snapshot()
        append_record(self.fh, record)
        self.pm.on_turn_end(run_id=self.run_id, turn=record)
        self.count_tokens(out)
        if control is not None:
            raise control
        if self.agent.max_tokens is not None and self.generated_tokens >= self.agent.max_tokens:
            raise LimitsExceeded("max_tokens", f"generated {self.generated_tokens} >= agent.max_tokens={self.agent.max_tokens}")

    # -- tools -------------------------------------------------------------------
    def execute(self, call: ToolCall, record: TurnRecord) -> tuple[Observation, bool]:
        """Run one call; every failure becomes an error observation."""
        def error(text: str) -> tuple[Observation, bool]:
            return Observation(tool_call_id=call.id, name=call.name, content=text, is_error=True), False

        tool = self.c.tools.get(call.name)
        if tool is None:
            return error(f"unknown tool {call.name!r}; available tools: {', '.join(self.c.tools)}")
        try:
            args = tool.Args.model_validate(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in exc.errors())
            return error(f"invalid arguments for {call.name}: {problems}; fields: {', '.join(tool.Args.model_fields)}")
        ctx = ToolContext(workspace=self.ws, task=self.task, backend=self.c.backend, run_dir=self.out_dir,
                          turn=self.turn, config=self.config, state=self.state)
        t0 = time.monotonic()
        try:
            output = tool.run(args, ctx)
        except WorkspaceError as exc:
            return error(str(exc))
        except Exception as exc:  # a tool bug must not end the episode; the model sees it
            log.warning("tool raised", tool=call.name, error=repr(exc))
            return error(f"tool {call.name} failed: {type(exc).__name__}: {exc}")
        finally:
            key = f"tool.{call.name}_s"
            record.timings[key] = record.timings.get(key, 0.0) + time.monotonic() - t0
        if output.result is not None:
            self.add_result(record, output.result)
        obs = Observation(tool_call_id=call.id, name=call.name, content=output.content, is_error=output.is_error)
        return obs, output.submit

    def add_result(self, record: TurnRecord, result: CandidateResult) -> None:
        if result.snapshot_id is None:  # tie the verdict to the exact state it judged
            result = result.model_copy(update={"snapshot_id": self.ws.snapshot()})
        result = self.stamp.apply(result)
        record.results.append(result)
        self.results.append(result)

    def observe(self, record: TurnRecord, obs: Observation) -> None:
        obs = obs.model_copy(update={"content": truncate(obs.content, self.agent.observation_limit)})
        record.observations.append(obs)
        if obs.tool_call_id is None:
            self.messages.append(Message(role="user", content=obs.content))
        else:
            self.messages.append(Message(role="tool", content=obs.content, tool_call_id=obs.tool_call_id, name=obs.name))

    def single_turn(self, text: str, record: TurnRecord) -> None:
        """Write the response's files, then compile -> verify -> profile while they pass."""
        files, errors = parse_solution_files(text)
        written = []
        for path, content in files.items():
            try:
                self.ws.write(path, content)
                written.append(path)
            except WorkspaceError as exc:
                errors.append(str(exc))
        lines = [f"wrote: {', '.join(written) or '(nothing)'}", *errors]
        backend = self.c.backend
        for phase in (backend.compile, backend.verify, backend.profile):
            result = phase(self.ws, self.task)
            self.add_result(record, result)
            lines.append(f"[{result.phase}] " + result.summary_for_agent())
            if result.status not in (Status.correct,):
                break
        self.observe(record, Observation(name="solution", content="\n".join(lines), is_error=bool(errors)))

    # -- accounting and the end ------------------------------------------------------
    @staticmethod
    def turn_tokens(out: PolicyOutput) -> TurnTokens | None:
        if out.output_ids is None:
            return None
        logprobs = out.output_logprobs if out.output_logprobs is not None else [0.0] * len(out.output_ids)
        return TurnTokens(prompt_delta_ids=out.prompt_delta_ids or [], output_ids=out.output_ids, output_logprobs=logprobs)

    def count_tokens(self, out: PolicyOutput) -> None:
        for key, value in out.usage.items():
            self.usage[key] = self.usage.get(key, 0) + int(value)
        self.generated_tokens += len(out.output_ids) if out.output_ids is not None else int(out.usage.get("completion_tokens", 0))

    def finish(self, exit: str, message: str) -> EndRecord:
        """Select a state, restore it into a fresh folder, grade it, reward it.

        A policy that failed before the workspace changed leaves nothing to grade: the end record has no graded
        result and no reward (an empty workspace graded 'compile_error' would read as the model's failure).
        """
        selection = self.agent.selection
        snapshot = select_snapshot(selection, self.results, self.ws.snapshot())
        graded, reward = None, None
        if exit == "policy_error" and snapshot == self.initial_snapshot:
            message += " (not graded: the workspace was never changed)"
        else:
            self.check_stop("before grading")
            graded = self.grade(snapshot)
            self.check_stop("during grading")  # a grading pass whose processes were ended is no verdict
            reward = float(self.c.reward.score(graded, list(self.results)))
        return EndRecord(exit=exit, message=message, turns=self.turn, graded=graded, selected_snapshot_id=snapshot,
                         selection=selection, reward=reward, reward_name=self.config.reward,
                         wall_s=time.monotonic() - self.start, usage=dict(self.usage))

    def grade(self, snapshot: str) -> CandidateResult:
        dest = self.out_dir / "graded"
        n = 1
        while dest.exists():
            n += 1
            dest = self.out_dir / f"graded-{n}"
        try:
            ws = type(self.ws).restore(snapshot, self.ws.store, dest)  # the Workspace protocol's restore
            result = self.c.backend.grade(ws, self.task)
        except Exception as exc:  # grading must always yield a record
            log.error("grading failed", run_id=self.run_id, error=repr(exc))
            result = CandidateResult(task_id=self.task.id, phase="grade", status=Status.error,
                                     message=f"grading failed: {type(exc).__name__}: {exc}")
        if result.snapshot_id is None:
            result = result.model_copy(update={"snapshot_id": snapshot})
        return self.stamp.apply(result)
