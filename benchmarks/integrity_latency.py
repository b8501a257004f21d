"""Latency of the integrity checks on every compile: static checks per example workspace, binary check per module.

Usage: python benchmarks/integrity_latency.py [--repeats N] [--so PATH ...] [--out FILE.json]
Prints the median milliseconds per workspace (check_sources) and per module (check_binary) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from cuda_agent.harness.integrity import check_binary, check_sources

ROOT = Path(__file__).resolve().parents[1]


def _median_ms(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per item (median reported)")
    parser.add_argument("--so", type=Path, nargs="*", default=[], help="built modules to time check_binary on")
    parser.add_argument("--out", type=Path, default=Path("integrity_latency.json"), help="JSON output file")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {"check_sources_ms": {}, "check_binary_ms": {}}
    for ws in sorted((ROOT / "examples" / "solutions").glob("*/*")):
        if (ws / "model_new.py").is_file():
            kind = ws.parent.name
            ms = _median_ms(lambda ws=ws, kind=kind: check_sources(ws, kind), args.repeats)
            results["check_sources_ms"][f"{kind}/{ws.name}"] = round(ms, 2)
            print(f"check_sources {kind}/{ws.name}: {ms:.1f} ms (median of {args.repeats})")
    for so in args.so:
        ms = _median_ms(lambda so=so: check_binary(so, "cuda"), args.repeats)
        results["check_binary_ms"][str(so)] = round(ms, 2)
        print(f"check_binary {so}: {ms:.1f} ms (median of {args.repeats})")
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
