"""Resumable eval folders: the saved config and task list, and what is already done.

An episode is done when its ``eval.json`` exists (written last, atomically).
Anything else in its folder is a leftover of a killed run and is deleted
before the episode runs again, so an episode is never lost and never
counted twice. A different config (beyond the scheduling-only fields) or a
changed task list refuses to resume and says what differs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from cuda_agent import __version__
from cuda_agent.config import config_diff, config_hash, resolved, without_secrets
from cuda_agent.errors import ConfigError
from cuda_agent.harness.evaluation.config import EvalConfig, comparable
from cuda_agent.harness.evaluation.records import EVAL_RECORD_FILE, read_end_record, read_eval_record, write_json_atomic
from cuda_agent.schemas.task import TaskManifest

CONFIG_FILE = "config.json"
TASKS_FILE = "tasks.json"


class ResumeRefused(ConfigError):
    """The eval folder holds a run made with a different config or task list."""

    def __init__(self, out_dir: Path, what: str, diff: list[str]) -> None:
        self.diff = diff
        lines = "\n  ".join(diff)
        super().__init__(
            f"{out_dir} holds an eval run with a different {what}; refusing to resume. Differences:\n  {lines}\n"
            "Use another --out folder, or restore the saved settings."
        )


def episode_name(task_id: str, seed_index: int) -> str:
    """Folder name of an episode: the task id with '/' -> '--', then '__seed<k>'."""
    safe = task_id.replace("/", "--").replace("#", "-").replace(":", "-")
    return f"{safe}__seed{seed_index}"


def check_or_save_config(out_dir: Path, config: EvalConfig, plugins: dict[str, str] | None = None) -> bool:
    """Save the config on a fresh folder; on an existing run refuse a different one. True = resuming.

    :param plugins: the enabled plugins (name -> 'distribution version'), saved for the report's provenance.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / CONFIG_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        diff = config_diff(without_secrets(saved.get("comparable", {})), comparable(config))
        if diff:
            raise ResumeRefused(out_dir, "config", diff)
        return True
    write_json_atomic(path, {"config": resolved(config), "comparable": comparable(config),
                             "config_hash": config_hash(config), "package_version": __version__,
                             "plugins": dict(plugins or {})})
    return False


def saved_tasks(out_dir: Path, listed: list[TaskManifest]) -> list[TaskManifest] | None:
    """On resume: the manifests saved by the first session, after checking the source still lists the same tasks.

    ``listed`` are the tasks the source yields now (unprobed); their ids and
    code hashes must equal the saved listing. Returns None on a fresh folder.
    """
    path = out_dir / TASKS_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    diff = config_diff(data["listed"], {t.id: t.code_hash for t in listed})
    if diff:
        raise ResumeRefused(out_dir, "task list (ids or code hashes)", diff)
    return [TaskManifest.model_validate(t) for t in data["tasks"]]


def save_tasks(out_dir: Path, listed: list[TaskManifest], prepared: list[TaskManifest]) -> None:
    """Save the source's listing (ids, code hashes) and the prepared (probed) manifests."""
    write_json_atomic(out_dir / TASKS_FILE, {
        "listed": {t.id: t.code_hash for t in listed},
        "tasks": [t.model_dump(mode="json") for t in prepared],
    })


#: Episode exits that say nothing about the model's kernel: the policy or the harness failed. They are
#: failures in the report and in the exit status, and ``eval.retry_errors`` runs them again on resume.
RETRYABLE_EXITS = frozenset({"policy_error", "error"})


def error_of(episode_dir: Path) -> str | None:
    """Why a finished episode counts as an error run ('runner_error', 'policy_error', 'error'), else None."""
    rec = read_eval_record(episode_dir)
    if rec is None:
        return None
    if rec.runner_error is not None:
        return "runner_error"
    end = read_end_record(episode_dir)
    return end.exit if end is not None and end.exit in RETRYABLE_EXITS else None


def is_done(episode_dir: Path, retry_errors: bool = False) -> bool:
    """The episode finished (its eval.json exists; with ``retry_errors``, and it did not end in an error)."""
    if not (episode_dir / EVAL_RECORD_FILE).exists():
        return False
    return not (retry_errors and error_of(episode_dir) is not None)


def errors_in(out_dir: Path) -> dict[str, int]:
    """Finished episodes of an eval folder that ended in an error, counted by kind."""
    counts: dict[str, int] = {}
    root = Path(out_dir) / "episodes"
    for ep_dir in sorted(root.iterdir()) if root.is_dir() else []:
        kind = error_of(ep_dir) if ep_dir.is_dir() else None
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def clear_partial(episode_dir: Path) -> bool:
    """Delete a killed run's leftovers of an unfinished episode; True when something was deleted."""
    if episode_dir.exists():
        shutil.rmtree(episode_dir)
        return True
    return False


def saved_config(out_dir: Path) -> dict[str, Any] | None:
    """The resolved config saved in an eval folder, if any."""
    path = Path(out_dir) / CONFIG_FILE
    return json.loads(path.read_text())["config"] if path.exists() else None
