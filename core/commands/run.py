"""``cuda-agent run TASK --policy SPEC --backend NAME --out DIR``: one episode.

TASK is a KernelBench-format ``.py`` file (read and probed by the ``file``
task source) or a task manifest ``.json``. The run folder gets ``trajectory.jsonl``,
``result.json``, ``config.json``, ``plugins.json``, ``versions.json``, the
workspace and the snapshot store. Re-running into a finished folder with the
same config reports it; a different config is refused with the difference; an
unfinished one (interrupted) with the same config is run again from the start.

Exit status: 0 the episode ended and was graded; 1 the policy failed
(``policy_error``) or the episode hit a harness error; 2 refused (bad config,
unusable backend); 130 interrupted (Ctrl-C: the episode stops at its next
tool call, its processes are ended after 5 s; a second Ctrl-C stops at once).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from cuda_agent.cli import INTERRUPTED, add_config_options, make_plugin_manager
from cuda_agent.config import RunConfig, config_diff, load_config, without_secrets
from cuda_agent.errors import ConfigError
from cuda_agent.hookspecs import hookimpl
from cuda_agent.interrupts import EpisodeInterrupted, StopSignal
from cuda_agent.plugin_manager import PluginManager
from cuda_agent.schemas.task import TaskManifest

#: Episode exits that make ``run`` fail (non-zero status): the episode says nothing about the model's kernel.
FAILED_EXITS = frozenset({"policy_error", "error"})


def register_command(subparsers) -> None:
    """Add ``run``."""
    p = subparsers.add_parser("run", help="Run one agent episode on a task.", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", metavar="TASK", help="Task .py file (KernelBench format) or task manifest .json.")
    p.add_argument("--policy", help="Policy spec NAME[:TARGET][?k=v&...] (overrides config 'policy').")
    p.add_argument("--backend", help="Backend name (overrides config 'backend').")
    p.add_argument("--reward", help="Reward name (overrides config 'reward').")
    p.add_argument("--turns", type=int, help="Turn budget (overrides config 'agent.max_turns').")
    p.add_argument("--out", type=Path, help="Run folder (default runs/<task>-<UTC time>).")
    add_config_options(p)
    p.set_defaults(func=handle)


def load_task(path: Path, pm: PluginManager) -> TaskManifest:
    """A manifest from a ``.json`` file, or read and probed from a ``.py`` task by the ``file`` task source."""
    if not path.is_file():
        raise ConfigError(f"task file {path} does not exist")
    if path.suffix == ".json":
        try:
            return TaskManifest.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"task manifest {path} is invalid: {exc}") from exc
    if path.suffix != ".py":
        raise ConfigError(f"task {path}: expected a .py task module or a .json manifest")
    source = pm.registry.build("data_source", "file", {"target": str(path), "id": f"tasks/{path.stem}", "probe": True},
                               where="TASK")
    return next(iter(source.iter_tasks()))


def check_existing_run(out: Path, config: RunConfig) -> bool:
    """True when ``out`` holds a finished run with this config; errors on a conflicting one.

    An unfinished run (interrupted, no result.json) with the same config is cleared, to run again.
    """
    saved_path = out / "config.json"
    if not saved_path.exists():
        if (out / "trajectory.jsonl").exists():
            raise ConfigError(f"{out} holds a trajectory without config.json; choose another --out")
        return False
    diff = config_diff(without_secrets(json.loads(saved_path.read_text())), without_secrets(config))
    if diff:
        raise ConfigError(f"{out} holds a run with a different config; refusing to mix them:\n  " + "\n  ".join(diff))
    if (out / "result.json").exists():
        return True
    shutil.rmtree(out)  # the same config, never finished: its partial files are replaced by a fresh run
    return False


class TurnProgress:
    """Observer plugin showing a rich progress bar of the episode's turns (on stderr)."""

    def __init__(self, max_turns: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[last]}"),
                                 console=Console(stderr=True), transient=False)
        self.max_turns = max_turns
        self.task_id = None

    @hookimpl
    def on_episode_start(self, run_id, task_id, config):
        """Start the bar."""
        self.progress.start()
        self.task_id = self.progress.add_task(f"{task_id} turns", total=self.max_turns, last="")

    @hookimpl
    def on_turn_end(self, run_id, turn):
        """Advance by one turn; show the turn's tools."""
        tools = ",".join(c.name for c in turn.tool_calls) or "-"
        self.progress.update(self.task_id, advance=1, last=tools)

    @hookimpl
    def on_episode_end(self, run_id, end):
        """Stop the bar."""
        self.progress.update(self.task_id, last=f"{end.exit}, reward {end.reward}")
        self.progress.stop()


def handle(args: argparse.Namespace) -> int:
    """Run the episode and print its outcome; the exit status says whether it counts (see the module doc)."""
    from cuda_agent.loop import run_episode

    overrides = list(args.override)
    for key in ("policy", "backend", "reward"):
        if getattr(args, key):
            overrides.append(f"{key}={json.dumps(getattr(args, key))}")
    if args.turns is not None:
        overrides.append(f"agent.max_turns={args.turns}")
    config = load_config(RunConfig, args.config, overrides)
    progress = TurnProgress(config.agent.max_turns)
    pm = make_plugin_manager(args, config, extra_plugins=[("cli.progress", progress)])
    task = load_task(Path(args.task), pm)
    out = args.out or Path("runs") / f"{task.name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    if check_existing_run(out, config):
        print(f"{out} already holds a finished run with this config: {(out / 'result.json').read_text()}")
        return 0
    with StopSignal(what="the episode") as stop:
        try:
            end = run_episode(task, config=config, plugin_manager=pm, out_dir=out, stop=stop)
        except EpisodeInterrupted:
            progress.progress.stop()
            print(f"interrupted: {out} is unfinished (no result.json); the same command runs it again",
                  file=sys.stderr)
            return INTERRUPTED
    graded = f"graded={end.graded.status.value}" if end.graded else "not graded"
    print(f"run {out}: exit={end.exit} turns={end.turns} {graded} reward={end.reward} ({end.reward_name})")
    if end.exit in FAILED_EXITS:
        print(f"error: the episode ended in {end.exit}: {end.message}", file=sys.stderr)
        return 1
    return 0
