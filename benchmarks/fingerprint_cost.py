"""What one fingerprint costs on the device: the one-read checksum against session 32's three-pass one.

    python benchmarks/fingerprint_cost.py --sizes-gib 0.0625 1 4 8 --out fingerprint_cost.json

Every call takes a fingerprint of each input afterwards (T5) and of each output the trusted side may read (T10); on
KernelBench's multi-GiB sets these were two thirds of a call's cost in session 32 (``call_work_s``: 14 GiB norms,
2.0 s input and 2.0 s output fingerprints against 1.6 s of timed forwards, per 100 calls). For each size this
times ``cuda_agent.harness.compare.fingerprint`` (the one-read checksum of :mod:`cuda_agent.harness.checksum`) on an
aligned tensor and on an offset view (copied block by block for the int8 product), and the three-pass checksum it
replaced (each 32-bit word times an odd weight, wrapped, summed in 64 bits per 64 MiB chunk), which is kept here only
as the baseline. Prints a table (ms, GB/s of the data read) and writes JSON. Needs CUDA.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

_OLD_CHUNK = 1 << 24


def three_pass_checksum(raw: Any, weights: Any) -> int:
    """Session 32's checksum (the baseline): words times odd weights per chunk, summed in int64."""
    import torch

    words = raw.view(torch.int32)
    total = torch.zeros((), dtype=torch.int64, device=raw.device)
    for c, start in enumerate(range(0, words.numel(), _OLD_CHUNK)):
        part = words[start : start + _OLD_CHUNK]
        total += (part * weights[: part.numel()]).sum(dtype=torch.int64) * (2 * c + 1)
    return int(total.item())


def timed_ms(fn: Any, repeats: int) -> list[float]:
    import torch

    fn()  # warm: cuBLAS handles, workspaces, weight tables
    out = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()  # each ends in .item(): a device synchronisation
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes-gib", type=float, nargs="+", default=[0.0625, 1.0, 4.0, 8.0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="JSON file to write")
    args = ap.parse_args()

    import torch

    from cuda_agent.harness.compare import fingerprint

    if not torch.cuda.is_available():
        raise SystemExit("fingerprint_cost.py needs a CUDA device (the CPU fingerprints are sha256)")
    weights = (torch.arange(_OLD_CHUNK, device="cuda", dtype=torch.int32) % 65521) * 2 + 1
    rows: list[dict[str, Any]] = []
    print(f"{'GiB':>8} {'variant':<18} {'median ms':>10} {'GB/s':>8}")
    for gib in args.sizes_gib:
        n = int(gib * 2**30) // 4
        x = torch.randn(n + 1, device="cuda")  # one spare element for the offset view
        aligned, offset = x[:n], x[1:]
        raw = aligned.view(torch.uint8)
        variants = {
            "one_read": (fingerprint, aligned),
            "one_read_offset": (fingerprint, offset),
            "three_pass": (lambda r: three_pass_checksum(r, weights), raw),
        }
        for name, (fn, arg) in variants.items():
            ms = timed_ms(lambda: fn(arg), args.repeats)
            med = statistics.median(ms)
            row = {"gib": gib, "variant": name, "median_ms": round(med, 3), "min_ms": round(min(ms), 3),
                   "gb_per_s": round(4 * n / med / 1e6, 1), "ms": [round(v, 3) for v in ms]}
            rows.append(row)
            print(f"{gib:>8.4g} {name:<18} {med:>10.3f} {row['gb_per_s']:>8.1f}")
        del x, aligned, offset, raw, variants
        torch.cuda.empty_cache()
    from cuda_agent.harness.checksum import int8_product_works

    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "int8_product": int8_product_works(torch.device("cuda")), "rows": rows}
    print(f"int8 product used: {result['int8_product']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
