"""``cuda-agent show RUN``: a readable view of a run's trajectory (rich)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cuda_agent.cli import add_config_options
from cuda_agent.config import RunConfig, load_config

from cuda_agent.errors import ConfigError
from cuda_agent.schemas.trajectory import LoadedTrajectory, load_trajectory


def register_command(subparsers) -> None:
    """Add ``show``."""
    p = subparsers.add_parser("show", help="Show a run's trajectory.")
    p.add_argument("run", type=Path, metavar="RUN", help="Run folder or trajectory.jsonl.")
    p.add_argument("--turn", type=int, default=None, help="Show only this turn.")
    p.add_argument("--full", action="store_true", help="Do not shorten long texts.")
    p.add_argument("--prompts", action="store_true", help="Also print the system and task prompts.")
    add_config_options(p)
    p.set_defaults(func=handle)


def _short(text: str, full: bool, limit: int = 1500) -> str:
    return text if full or len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters; --full shows all)"


def render(traj: LoadedTrajectory, *, turn: int | None = None, full: bool = False, prompts: bool = False) -> None:
    """Print the trajectory to the terminal."""
    from rich.console import Console
    from rich.markup import escape
    from rich.panel import Panel
    from rich.rule import Rule

    console = Console()
    h = traj.header
    if h is not None:
        console.print(Panel(f"run [bold]{escape(h.run_id)}[/] task [bold]{escape(h.task_id)}[/]\n"
                            f"policy {escape(h.policy)}  backend {escape(h.backend)}  mode {h.mode}  started {h.started_at}\n"
                            f"tools: {escape(', '.join(t['name'] for t in h.tools))}", title="header"))
        if prompts:
            console.print(Panel(escape(_short(h.system_prompt, full)), title="system prompt"))
            console.print(Panel(escape(_short(h.task_prompt, full)), title="task prompt"))
    for t in traj.turns:
        if turn is not None and t.turn != turn:
            continue
        timing = ", ".join(f"{k}={v:.2f}" for k, v in t.timings.items())
        console.print(Rule(f"turn {t.turn}  ({timing})"))
        if t.text.strip():
            console.print(Panel(escape(_short(t.text, full)), title="assistant", border_style="cyan"))
        for obs in t.observations:
            style = "red" if obs.is_error else "green"
            console.print(Panel(escape(_short(obs.content, full)), title=f"{escape(obs.name)}", border_style=style))
        for r in t.results:
            console.print(f"  [bold]{r.phase}[/]: {r.status.value}" + (f" rule {r.rule}" if r.rule else "")
                          + (f"  {r.timing.median_ms:.4f} ms" if r.timing else ""))
    if traj.truncated:
        console.print("[yellow]the file ends in a cut line (the writer was killed); complete turns are shown[/]")
    e = traj.end
    if e is not None:
        graded = f"{e.graded.status.value}" + (f" ({e.graded.message})" if e.graded and e.graded.message else "") if e.graded else "none"
        console.print(Panel(f"exit {e.exit} after {e.turns} turns ({e.wall_s:.1f} s)\nselection {e.selection}: "
                            f"{e.selected_snapshot_id}\ngraded: {escape(graded)}\nreward ({e.reward_name}): {e.reward}",
                            title="end", border_style="magenta"))
    elif not traj.truncated:
        console.print("[yellow]no end record: the run is unfinished[/]")


def handle(args: argparse.Namespace) -> int:
    """Load and render."""
    load_config(RunConfig, args.config, args.override)  # validated like every command's
    path = args.run / "trajectory.jsonl" if args.run.is_dir() else args.run
    if not path.is_file():
        raise ConfigError(f"no trajectory at {path}; give a run folder or a trajectory.jsonl")
    render(load_trajectory(path), turn=args.turn, full=args.full, prompts=args.prompts)
    return 0
