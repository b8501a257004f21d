"""``trajectory.jsonl``: one header line, one line per turn, one end line.

Writers append a complete line (``json + "\\n"``) and flush + fsync after
every turn, so a run killed at any point leaves a file whose complete lines
are all valid. :func:`load_trajectory` returns every complete turn and flags
a cut tail (a last line without newline, or one that is not valid JSON).

Token layout (the tokenization contract, ``docs/interfaces.md``): the token
sequence of an episode is ``system_prompt_ids`` (in the header) followed, for
each turn, by ``tokens.prompt_delta_ids`` then ``tokens.output_ids``. The
loss mask is 0 on the header and prompt deltas (prompt, observations, chat
scaffolding) and 1 on output ids: :func:`episode_token_layout` builds it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent import INTERFACES_VERSION
from cuda_agent.errors import TrajectoryError
from cuda_agent.schemas.messages import ToolCall
from cuda_agent.schemas.result import CandidateResult


class TurnTokens(BaseModel):
    """Token-level record of one turn (token-level policies only)."""

    model_config = ConfigDict(extra="forbid")

    prompt_delta_ids: list[int] = Field(description="Context tokens added before this generation (mask 0).")
    output_ids: list[int] = Field(description="Tokens the policy generated (mask 1).")
    output_logprobs: list[float] = Field(description="Rollout log-prob of each output token.")


class Observation(BaseModel):
    """An observation exactly as shown to the model."""

    model_config = ConfigDict(extra="forbid")

    tool_call_id: str | None = Field(None, description="The call it answers; None for format errors.")
    name: str = Field(description="Tool name, or 'format_error' / 'limit'.")
    content: str = Field(description="Text shown to the model (after truncation).")
    is_error: bool = Field(False, description="The call failed (bad arguments, tool error, refused).")


class HeaderRecord(BaseModel):
    """First line: what ran, with what."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["header"] = "header"
    schema_version: str = Field(INTERFACES_VERSION, description="Interfaces version.")
    run_id: str = Field(description="Run id.")
    task_id: str = Field(description="TaskManifest.id.")
    task_code_hash: str = Field(description="TaskManifest.code_hash.")
    policy: str = Field(description="Policy spec string.")
    backend: str = Field(description="Backend name.")
    mode: Literal["agent", "single_turn"] = Field("agent", description="Loop mode.")
    system_prompt: str = Field(description="Rendered system prompt.")
    task_prompt: str = Field(description="Rendered first user message.")
    system_prompt_ids: list[int] | None = Field(None, description="Tokens of the initial context (token-level policies).")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="Tool schemas shown to the model.")
    config: dict[str, Any] = Field(default_factory=dict, description="Resolved config, secrets redacted.")
    plugins: list[dict[str, Any]] = Field(default_factory=list, description="Loaded plugins (name, dist, version).")
    versions: dict[str, str] = Field(default_factory=dict, description="Package versions.")
    started_at: str = Field(description="ISO-8601 UTC.")


class TurnRecord(BaseModel):
    """One turn: the model's output, the tool calls, the observations."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["turn"] = "turn"
    turn: int = Field(description="Turn index, from 1.")
    text: str = Field(description="Model output text.")
    tokens: TurnTokens | None = Field(None, description="Token-level record, when the policy gives one.")
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Parsed tool calls.")
    observations: list[Observation] = Field(default_factory=list, description="Observations as shown.")
    results: list[CandidateResult] = Field(default_factory=list, description="Results of compile/verify/profile calls.")
    snapshot_id: str | None = Field(None, description="Workspace snapshot after the turn's tools ran.")
    timings: dict[str, float] = Field(default_factory=dict, description="'policy_s', 'tools_s', per tool.")
    usage: dict[str, int] = Field(default_factory=dict, description="prompt_tokens, completion_tokens.")


class EndRecord(BaseModel):
    """Last line: why the episode ended, the graded result and the reward."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["end"] = "end"
    exit: str = Field(description="'submitted', 'max_turns', 'max_tokens', 'wall_clock', 'policy_error', 'error'.")
    message: str = Field("", description="Details of the exit.")
    turns: int = Field(description="Number of turns taken.")
    graded: CandidateResult | None = Field(None, description="Trusted grading result of the selected state.")
    selected_snapshot_id: str | None = Field(None, description="Workspace snapshot that was graded.")
    selection: str = Field("final", description="'final', 'best', 'first_passing'.")
    reward: float | None = Field(None, description="Reward plugin's value for the graded result.")
    reward_name: str | None = Field(None, description="Reward plugin used.")
    wall_s: float = Field(0.0, description="Episode wall time.")
    usage: dict[str, int] = Field(default_factory=dict, description="Total tokens.")


Record = HeaderRecord | TurnRecord | EndRecord


class LoadedTrajectory(BaseModel):
    """What :func:`load_trajectory` returns."""

    header: HeaderRecord | None
    turns: list[TurnRecord]
    end: EndRecord | None
    truncated: bool = Field(description="The file ends in a cut line (the writer was killed mid-write).")
    path: str = ""

    @property
    def complete(self) -> bool:
        return self.header is not None and self.end is not None and not self.truncated


def append_record(fh: IO[str], record: BaseModel) -> None:
    """Append one complete line and make it durable before returning."""
    fh.write(record.model_dump_json() + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def _parse(obj: dict[str, Any]) -> Record:
    kind = obj.get("type")
    model = {"header": HeaderRecord, "turn": TurnRecord, "end": EndRecord}.get(kind)  # type: ignore[arg-type]
    if model is None:
        raise TrajectoryError(f"unknown record type {kind!r}; valid: header, turn, end")
    return model.model_validate(obj)


def load_trajectory(path: str | Path) -> LoadedTrajectory:
    """Read a trajectory file; every complete line is returned, a cut tail flagged.

    A malformed line in the middle (not the last) is corruption, not a crash
    artefact, and raises :class:`TrajectoryError` with its line number.
    """
    path = Path(path)
    data = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    lines = data.split("\n")
    truncated = False
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        truncated = True  # last line has no newline: the writer died mid-line
        lines.pop()
    header: HeaderRecord | None = None
    turns: list[TurnRecord] = []
    end: EndRecord | None = None
    for i, line in enumerate(lines, start=1):
        try:
            rec = _parse(json.loads(line))
        except (json.JSONDecodeError, ValidationError, TrajectoryError) as exc:
            if i == len(lines):
                truncated = True
                break
            raise TrajectoryError(f"{path}:{i}: invalid trajectory line: {exc}") from exc
        if isinstance(rec, HeaderRecord):
            header = rec
        elif isinstance(rec, TurnRecord):
            turns.append(rec)
        else:
            end = rec
    return LoadedTrajectory(header=header, turns=turns, end=end, truncated=truncated, path=str(path))


def episode_token_layout(
    header: HeaderRecord, turns: list[TurnRecord]
) -> tuple[list[int], list[int], list[float]]:
    """Token ids, loss mask (1 = policy token) and rollout log-probs of an episode.

    Log-probs are 0.0 at mask-0 positions. Raises if any turn lacks tokens.
    """
    if header.system_prompt_ids is None:
        raise TrajectoryError("trajectory has no token record (policy was not token-level)")
    ids = list(header.system_prompt_ids)
    mask = [0] * len(ids)
    logps = [0.0] * len(ids)
    for t in turns:
        if t.tokens is None:
            raise TrajectoryError(f"turn {t.turn} has no token record")
        ids += t.tokens.prompt_delta_ids
        mask += [0] * len(t.tokens.prompt_delta_ids)
        logps += [0.0] * len(t.tokens.prompt_delta_ids)
        ids += t.tokens.output_ids
        mask += [1] * len(t.tokens.output_ids)
        logps += list(t.tokens.output_logprobs)
    return ids, mask, logps
