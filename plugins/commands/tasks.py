"""Command ``tasks``: ``tasks check SPEC``, the self-check of a task suite (:mod:`cuda_agent.harness.suite_check`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cuda_agent.hookspecs import hookimpl


def add_parser(subparsers: Any) -> None:
    """Add ``tasks`` with its ``check`` subcommand."""
    from cuda_agent.cli import add_config_options
    from cuda_agent.harness.timing_protocol import PRESETS

    p = subparsers.add_parser("tasks", help="Work with task suites: 'tasks check SPEC' self-checks every task.")
    sub = p.add_subparsers(dest="tasks_command", required=True)
    c = sub.add_parser(
        "check", help="Grade each task's own Model as the candidate (sandbox, comparison, timing): the first thing "
        "to run on a new GPU or a new task set.")
    c.add_argument("spec", help="Task source spec, e.g. kernelbench:/data/KB?levels=1,2,3 or folder:examples/tasks.")
    c.add_argument("--backend", help="Backend name ('cpu', 'cuda'); default: the config's.")
    c.add_argument("--out", required=True, type=Path, help="Output folder (re-run the same command to resume).")
    c.add_argument("--concurrency", type=int, help="Tasks in flight (eval.concurrency).")
    c.add_argument("--device-steps", type=int, help="Graded parts on one device at once (eval.device_steps); timed "
                   "batches stay alone on the device whatever it is.")
    c.add_argument("--limit", type=int, help="At most this many tasks (eval.limit).")
    c.add_argument("--retry-errors", action="store_true", help="On resume, check tasks that ended in error again.")
    c.add_argument("--retry-too-large", action="store_true",
                   help="On resume, check tasks that were too large for the device again (on a larger GPU).")
    c.add_argument("--redo", action="append", default=[], metavar="TASK",
                   help="On resume, check again every task whose id contains TASK (repeatable; e.g. after a harness "
                        "fix: --redo level3/9_ResNet18). Each run with it checks them again.")
    c.add_argument("--shard", metavar="K/N", help="Check only every N-th task of the plan from position K (one of N "
                   "GPUs or machines); the shards' rows.jsonl joined in one folder resume and report as one run.")
    c.add_argument("--recheck-outliers", action="store_true",
                   help="After the suite, check every correct task whose self-speedup is outside +-5%% once more, "
                        "alone on the device; its row keeps both looks ('alone'), and the report lists them.")
    c.add_argument("--report-only", action="store_true",
                   help="Check nothing: write report.json/md and the PNG from the rows the --out folder holds.")
    c.add_argument("--timing-preset", choices=PRESETS, default=None,
                   help="Timing preset of the backend's harness block (timing.preset). 'standard_fast' ends each "
                        "grading pass once both self-speedups are known to +-1%% and clear of the +-5%% band and "
                        "1.05 (rounds of 11 calls, 3 to 9): about 41%% less device hold than 'standard' on the "
                        "recorded KernelBench rows (benchmarks/grading_stop_replay.py). Default: the config's.")
    add_config_options(c)
    c.set_defaults(func=handle_check)


def handle_check(args: argparse.Namespace) -> int:
    """Run (or resume) the self-check; exit 0 when every task passed, 1 otherwise, 130 on Ctrl-C."""
    from cuda_agent.cli import make_plugin_manager
    from cuda_agent.config import load_config
    from cuda_agent.errors import CudaAgentError
    from cuda_agent.harness.evaluation.config import EvalConfig
    from cuda_agent.harness.suite_check import SuiteCheck
    from cuda_agent.interrupts import INTERRUPTED_STATUS, StopSignal

    overrides = list(args.override) + [f"eval.tasks={json.dumps(args.spec)}"]
    for flag, key in (("backend", "backend"), ("concurrency", "eval.concurrency"), ("limit", "eval.limit"),
                      ("device_steps", "eval.device_steps")):
        value = getattr(args, flag)
        if value is not None:
            overrides.append(f"{key}={value}")
    shard = None
    if args.shard is not None:
        k, _, n = args.shard.partition("/")
        if not (k.isdigit() and n.isdigit()):
            print(f"cuda-agent tasks check: --shard {args.shard!r}: want K/N, e.g. 0/4", file=sys.stderr)
            return 2
        shard = (int(k), int(n))
    try:
        config = load_config(EvalConfig, args.config, overrides)
        if args.timing_preset is not None:  # the backend's block, known once the config is
            overrides.append(f"plugins.{config.backend}.harness.timing.preset={args.timing_preset}")
            config = load_config(EvalConfig, args.config, overrides)
        config, applied = with_suite_defaults(config)
        if applied and not args.report_only:
            print("tasks check: " + ", ".join(f"eval.{k}={v}" for k, v in applied.items()) + " (the suite "
                  "self-check's defaults on a GPU; set them in the config, -o or the flags to change)", file=sys.stderr)
        with StopSignal(message="interrupt: queued tasks cancelled; running ones finish; the same command resumes; "
                                "Ctrl-C again to stop at once") as stop:
            report = SuiteCheck(config, args.out, make_plugin_manager(args, config), stop=stop,
                                retry=args.retry_errors, shard=shard, report_only=args.report_only,
                                recheck_outliers=args.recheck_outliers, retry_too_large=args.retry_too_large,
                                redo=args.redo).run()
    except CudaAgentError as exc:
        print(f"cuda-agent tasks check: {exc}", file=sys.stderr)
        return 2
    s = report["summary"]
    counts = ", ".join(f"{v} {k}" for k, v in s["by_status"].items()) or "nothing"
    print(f"checked {s['checked']} of {s['planned']} task(s) on {report['backend']}: {counts}; median self-speedup "
          f"vs eager {s['median_self_speedup_eager']}, within +-5%: {s['within_band_share']}; "
          f"report: {Path(args.out) / 'report.md'}")
    if s.get("ran_alone"):
        print(f"{len(s['ran_alone'])} task(s) ran again holding the device alone after an out-of-memory error: "
              + ", ".join(s["ran_alone"][:20]) + (" ..." if len(s["ran_alone"]) > 20 else ""))
    if stop.is_set() and s["checked"] < s["planned"]:
        return INTERRUPTED_STATUS
    return 0 if s["by_status"].get("correct", 0) == s["planned"] else 1


#: ``eval.concurrency`` and ``eval.device_steps`` of a GPU suite self-check that sets neither (eval's own defaults, 4
#: and 1, run a suite one graded part at a time). Measured on an H100 (session 35, KernelBench): 54 problems at these
#: settings, every new level-2 row within 1.1% of 1.0; concurrency is capped at half the host's cores.
SUITE_DEFAULTS = {"concurrency": 8, "device_steps": 2}


def with_suite_defaults(config: Any, cpu_count: int | None = None) -> tuple[Any, dict[str, int]]:
    """``config`` with :data:`SUITE_DEFAULTS` for what it leaves unset, on a GPU backend (the CPU backend times on
    the host's own cores: eval's defaults stay); returns it and what was applied."""
    import os

    if config.backend == "cpu":
        return config, {}
    cores = cpu_count if cpu_count is not None else os.cpu_count() or 1
    wanted = {"concurrency": max(1, min(SUITE_DEFAULTS["concurrency"], cores // 2)),
              "device_steps": SUITE_DEFAULTS["device_steps"]}
    applied = {k: v for k, v in wanted.items() if k not in config.eval.model_fields_set}
    if not applied:
        return config, {}
    return config.model_copy(update={"eval": config.eval.model_copy(update=applied)}), applied


@hookimpl
def register_commands(register) -> None:
    """Register ``tasks``."""
    register("tasks", add_parser, description="Task suites: 'tasks check SPEC' self-checks every task.")
