"""Join the ``rows.jsonl`` of several ``cuda-agent tasks check`` folders of one plan (the shards of one suite).

    python scripts/join_check_rows.py --out JOINED SHARD_DIR [SHARD_DIR ...]

Every folder must hold the same ``plan.json`` (shards of one ``tasks check`` command share the whole suite's plan).
A task's row from a later folder replaces an earlier one; within a folder the last line wins and a torn line is
skipped, as on resume (``suite_check.done_rows`` reads them). Writes
``JOINED/plan.json`` and ``JOINED/rows.jsonl``; then ``cuda-agent tasks check SPEC --out JOINED --report-only``
reports the suite (or resumes it, without ``--report-only``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cuda_agent.harness.suite_check import ROWS, done_rows  # the resume state's own reader


def join(folders: list[Path], out: Path) -> dict[str, int]:
    """Join the folders' rows into ``out``; return counts (folders, rows read, tasks kept)."""
    plans = {f: (f / "plan.json").read_text() for f in folders if (f / "plan.json").is_file()}
    if not plans:
        raise SystemExit(f"no plan.json in {', '.join(map(str, folders))}: nothing to join")
    if len({json.dumps(json.loads(p), sort_keys=True) for p in plans.values()}) > 1:
        raise SystemExit("the folders hold different plans (not shards of one tasks check command): "
                         + ", ".join(str(f) for f in plans))
    rows: dict[str, str] = {}
    read = 0
    for f in plans:
        found = done_rows(f)
        read += len(found)
        rows.update({task_id: row.model_dump_json() for task_id, row in found.items()})
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(next(iter(plans.values())))
    (out / ROWS).write_text("".join(line + "\n" for line in rows.values()))
    return {"folders": len(plans), "rows_read": read, "tasks": len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("folders", type=Path, nargs="+")
    args = ap.parse_args()
    counts = join([f for f in args.folders if f.resolve() != args.out.resolve()], args.out)
    print(f"joined {counts['tasks']} task rows from {counts['folders']} folder(s) ({counts['rows_read']} rows read) "
          f"into {args.out}", file=sys.stdout)


if __name__ == "__main__":
    main()
