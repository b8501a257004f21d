"""``cuda-agent eval``, ``report`` and ``ablate`` (loaded by ``cuda_agent.cli`` from its command table).

Every command takes ``-c FILE`` (repeatable) and ``-o key=value``
(repeatable); explicit flags (``--tasks``, ``--policy``...) are applied after
them. Exit codes of ``eval``: 0 every planned episode is done; 1 some ended in
an error (runner, policy or harness: ``-o eval.retry_errors=true`` runs them
again); 2 refused before anything was written (bad config or spec, unknown
component, no tasks, unusable backend, or resuming with a different config:
the difference is printed); 130 interrupted by Ctrl-C (queued episodes
cancelled, running ones stopped at their next tool call and not recorded: the
same command resumes; a second Ctrl-C stops at once).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import Field

from cuda_agent.config import StrictModel, load_config
from cuda_agent.errors import CudaAgentError


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", action="append", default=[], metavar="FILE", help="YAML config file (repeatable).")
    p.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE",
                   help="Dotted override, e.g. -o agent.max_turns=50 (repeatable).")


def _add_eval_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", help="Task source spec, e.g. folder:examples/tasks or kernelbench:/data/KB?levels=1.")
    p.add_argument("--policy", help="Policy spec, e.g. scripted:examples/trajectories/x.yaml or openai:MODEL?base_url=...")
    p.add_argument("--backend", help="Backend name ('cpu', 'cuda').")
    p.add_argument("--turns", type=int, help="Turn budget per episode (agent.max_turns).")
    p.add_argument("--seeds", type=int, help="Episodes per task (eval.seeds).")
    p.add_argument("--concurrency", type=int, help="Episodes in flight (eval.concurrency).")
    p.add_argument("--limit", type=int, help="At most this many tasks (eval.limit).")


def _flag_overrides(args: argparse.Namespace) -> list[str]:
    mapping = {"tasks": "eval.tasks", "policy": "policy", "backend": "backend", "turns": "agent.max_turns",
               "seeds": "eval.seeds", "concurrency": "eval.concurrency", "limit": "eval.limit"}
    out = []
    for attr, key in mapping.items():
        value = getattr(args, attr, None)
        if value is not None:
            out.append(f"{key}={json.dumps(value) if isinstance(value, str) else value}")
    return out


def _plugin_manager(args: argparse.Namespace, config: Any) -> Any:
    """The core CLI's plugin manager (honours ``cuda-agent -p MODULE``), or a plain one when run standalone."""
    from cuda_agent.cli import make_plugin_manager

    return make_plugin_manager(args, config)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _resume_config(out: Path, saved: dict[str, Any]) -> Any:
    """The saved config of ``out``, for a bare ``eval --out DIR``; refused when it held secrets (never saved)."""
    from cuda_agent.harness.evaluation.config import EvalConfig
    from cuda_agent.secrets import has_redacted

    places = has_redacted(saved)
    if places:
        raise CudaAgentError(f"{out}/config.json held secrets, which are never saved ({', '.join(places)}); resume by "
                             "passing the same -c/-o/flags again, or keep the key in its environment variable")
    return EvalConfig.model_validate(saved)


def eval_handler(args: argparse.Namespace) -> int:
    """Run (or resume) an evaluation, then write its report into OUT/report."""
    from cuda_agent.harness.evaluation.config import EvalConfig
    from cuda_agent.harness.evaluation.report import headline_line, write_report
    from cuda_agent.harness.evaluation.resume import saved_config
    from cuda_agent.harness.evaluation.runner import EvalRunner
    from cuda_agent.interrupts import INTERRUPTED_STATUS, StopSignal

    out = Path(args.out)
    overrides = list(args.override) + _flag_overrides(args)
    message = ("interrupt: queued episodes cancelled; running ones stop at their next tool call (their processes are "
               "ended after 5 s) and run again on resume; Ctrl-C again to stop at once")
    try:
        saved = saved_config(out)
        if saved is not None and not args.config and not overrides:
            config = _resume_config(out, saved)  # bare `eval --out DIR`: resume with the saved config
        else:
            config = load_config(EvalConfig, args.config, overrides)
        with StopSignal(message=message) as stop:
            outcome = EvalRunner(config, out, plugin_manager=_plugin_manager(args, config), stop=stop).run()
    except CudaAgentError as exc:
        return _fail(str(exc))
    if outcome.interrupted:
        print(f"interrupted: {outcome.done} of {outcome.planned} episodes done, {outcome.not_done} not done; "
              f"the same command runs them (results in {out})", file=sys.stderr)
        return INTERRUPTED_STATUS
    errors = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in sorted(outcome.errors.items()))
    print(f"episodes: {outcome.planned} planned, {outcome.already_done} already done, {outcome.ran} run now"
          + (f"; ended in errors: {errors} (-o eval.retry_errors=true runs them again)" if errors else "")
          + f"; results in {out}")
    if not args.no_report:
        report = write_report([out], out / "report", plots=not args.no_plots)
        print(headline_line(report["runs"][0]) + f"; report: {out / 'report' / 'report.md'}")
    return 1 if outcome.errors else 0


def report_handler(args: argparse.Namespace) -> int:
    """Write report.json, report.md and plots for one or more eval folders."""
    from cuda_agent.harness.evaluation.report import write_report

    dirs = [Path(d) for d in args.dirs]
    dest = Path(args.dest) if args.dest else (dirs[0] / "report" if len(dirs) == 1 else Path("report"))
    try:
        opts = load_config(ReportOptions, args.config, args.override)
        write_report(dirs, dest, plots=not args.no_plots and opts.plots, max_turns=opts.max_turns)
    except (CudaAgentError, FileNotFoundError) as exc:
        return _fail(str(exc))
    print(f"report: {dest / 'report.md'}")
    return 0


def ablate_handler(args: argparse.Namespace) -> int:
    """Run the ablation variants and print one comparison table."""
    from cuda_agent.harness.evaluation.ablate import (
        comparison_rows,
        format_table,
        leave_one_out,
        run_ablation,
        variants_from_file,
    )

    if bool(args.leave_one_out) == bool(args.variants):
        return _fail("give exactly one of --leave-one-out A,B,... or --variants FILE")
    try:
        variants = leave_one_out(args.leave_one_out.split(",")) if args.leave_one_out else variants_from_file(Path(args.variants))
        report = run_ablation(args.config, list(args.override) + _flag_overrides(args), variants, Path(args.out),
                              pm_factory=lambda cfg: _plugin_manager(args, cfg))
    except CudaAgentError as exc:
        return _fail(str(exc))
    print(format_table(comparison_rows(report)))
    return 0


class ReportOptions(StrictModel):
    """Options of ``cuda-agent report`` (its ``-c``/``-o`` config)."""

    max_turns: int | None = Field(None, ge=1, description="Length of the budget curves; None = the run's agent.max_turns.")
    plots: bool = Field(True, description="Render the PNG plots.")


def register_command(subparsers: Any) -> None:
    """Add ``eval``, ``report`` and ``ablate`` to the ``cuda-agent`` parser."""
    p = subparsers.add_parser("eval", help="Evaluate a policy over tasks (concurrent, resumable).",
                              description=eval_handler.__doc__)
    _add_config_args(p)
    _add_eval_flags(p)
    p.add_argument("--out", required=True, help="Output folder (re-run to resume).")
    p.add_argument("--no-report", action="store_true", help="Do not write OUT/report.")
    p.add_argument("--no-plots", action="store_true", help="Write the report without PNG plots.")
    p.set_defaults(func=eval_handler)

    p = subparsers.add_parser("report", help="Report one or more eval folders side by side.",
                              description=report_handler.__doc__)
    _add_config_args(p)
    p.add_argument("dirs", nargs="+", help="Eval output folders.")
    p.add_argument("--dest", help="Where to write the report (default DIR/report, or ./report for several).")
    p.add_argument("--no-plots", action="store_true", help="Skip the PNG plots.")
    p.set_defaults(func=report_handler)

    p = subparsers.add_parser("ablate", help="Evaluation-time ablations: one eval per variant, one table.",
                              description=ablate_handler.__doc__)
    _add_config_args(p)
    _add_eval_flags(p)
    p.add_argument("--leave-one-out", help="Comma list of components to disable one at a time ('skill', 'loop' switch settings).")
    p.add_argument("--variants", help="YAML file of config deltas (list of {name, set} or mapping name -> deltas).")
    p.add_argument("--out", required=True, help="Output folder; each variant in OUT/<name>.")
    p.set_defaults(func=ablate_handler)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m cuda_agent.harness.evaluation.cli``) until ``cuda-agent`` lists these commands."""
    parser = argparse.ArgumentParser(prog="cuda-agent")
    register_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
