"""Where the output check of a large output spends its time (issue 21: the 5 s turn on level1/19_ReLU).

On the H200 a kernel-edit turn on KernelBench's 19_ReLU at full size (6 GiB in, 6 GiB out) took 5.38 s, of which
the phase ``check`` was 0.82 s in verify and 0.68 s in profile. ``check`` covers, per checked call: the trusted
side mapping and copying the runner's exported output ('vmm'), its content checksum (rule T10), and the comparison
(the expected output's RMS is kept per set). This probe times each of those steps alone, with the project's own
functions, on one output of ``--gib`` GiB, ``--repeats`` times, and the runner-side staging for comparison:

- ``stage``: the runner copying its output into its exportable buffer (``VmmExporter.stage``; CUDA only);
- ``import_copy``: the trusted side's map + copy + unmap of that buffer (CUDA only);
- ``fingerprint``: the checksum of the copy;
- ``reference_rms``: the expected output's RMS (once per set in a session);
- ``compare``: ``compare_output`` with the RMS given;
- ``alloc``: a fresh tensor of the output's size (what the copy needs when the caching allocator has none free);
- ``call_copy_inputs``, ``call_poison``, ``call_input_fingerprint``: what the runner does around every call besides
  the kernel, for an input of the same size (on 12 GiB problems the round trips took ~100 ms a call for a 3 ms
  kernel in the KernelBench self-check).

Usage::

    python benchmarks/check_path_probe.py --out results/check_path_probe.json            # CUDA, 6 GiB
    python benchmarks/check_path_probe.py --device cpu --gib 0.05 --repeats 2          # the machinery on CPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timed(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[float, Any]:
    """Seconds ``fn`` took, the device synchronised before and after; and its value."""
    sync()
    t0 = time.perf_counter()
    value = fn()
    sync()
    return time.perf_counter() - t0, value


def probe(device_name: str, gib: float, repeats: int) -> dict[str, Any]:
    """Each step's seconds per repeat on one float32 output of ``gib`` GiB on ``device_name``."""
    import torch

    from cuda_agent.harness.compare import compare_output, fingerprint, reference_rms

    device = torch.device(device_name)
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    numel = int(gib * 2**30) // 4
    gen = torch.Generator(device=device).manual_seed(0)
    expected = torch.randn(numel, device=device, generator=gen).relu_()
    actual = expected.clone()
    steps: dict[str, list[float]] = {}

    def note(name: str, seconds: float) -> None:
        steps.setdefault(name, []).append(seconds)

    exporter = driver = None
    if cuda:
        from cuda_agent.harness._vmm import VmmExporter, driver_for

        exporter = VmmExporter(torch, device)
        driver = driver_for(torch, device)
    for _ in range(repeats):
        copy = actual
        if cuda:
            from cuda_agent.harness._vmm import import_copy

            s, desc = timed(lambda: exporter.stage(0, actual.view(torch.uint8)), sync)  # type: ignore[union-attr]
            note("stage", s)
            fd = os.dup(desc["fd"])
            try:
                s, raw = timed(lambda: import_copy(torch, driver, fd, desc["nbytes"], desc["alloc"], device), sync)
            finally:
                os.close(fd)
            note("import_copy", s)
            copy = raw.view(torch.float32)
            del raw
        s, _ = timed(lambda: fingerprint(copy), sync)
        note("fingerprint", s)
        s, rms = timed(lambda: reference_rms(expected), sync)
        note("reference_rms", s)
        s, errors = timed(lambda: compare_output(expected, copy, atol=1e-2, rtol=1e-2, rms=rms), sync)
        note("compare", s)
        if errors:
            raise SystemExit(f"the probe's own copy failed the comparison: {errors[0].message}")
        del copy
        s, fresh = timed(lambda: torch.empty(numel, device=device), sync)
        note("alloc", s)
        # What the runner does around every call besides the kernel (harness/candidate_runner.py, runner_io.py): the
        # input set copied into its staging buffer, output-sized memory filled with NaN, the inputs' checksum.
        s, _ = timed(lambda: fresh.copy_(expected), sync)
        note("call_copy_inputs", s)
        s, _ = timed(lambda: torch.full((numel,), float("nan"), device=device), sync)
        note("call_poison", s)
        s, _ = timed(lambda: fingerprint(fresh), sync)
        note("call_input_fingerprint", s)
        del fresh
        if cuda:
            torch.cuda.empty_cache()  # the next repeat's copy allocates again, as a new session's would
    return {
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "gib": gib,
        "numel": numel,
        "repeats": repeats,
        "median_s": {k: statistics.median(v) for k, v in steps.items()},
        "runs_s": steps,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="'cuda' (default) or 'cpu' (no 'vmm' steps)")
    ap.add_argument("--gib", type=float, default=6.0, help="size of the output in GiB (19_ReLU: 6)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = ap.parse_args(argv)
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print("error: --device cuda needs a CUDA device; use --device cpu for the machinery", file=sys.stderr)
            return 2
    result = probe(args.device, args.gib, args.repeats)
    for name, seconds in result["median_s"].items():
        print(f"{name:>14}: {seconds * 1e3:9.1f} ms (median of {args.repeats})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
