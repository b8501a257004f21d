"""Latency of the ``compile`` tool alone after a `.cu`-only edit and after a binding edit (no GPU needed).

Builds an example task's honest solution with the backend's own compile path
(``KernelBackend.compile``: incremental ninja build in the sandbox, then the
integrity rules), then times ``--repeats`` edits of each kind the way
``env_latency.py`` makes them (a comment appended to the file), plus the
no-op rebuild that ``verify`` and ``profile`` each run first. Per edit it
records where the time went: ninja's own per-target times (``.ninja_log``:
start/end ms of every edge it ran), the build as a whole
(``build_extension``), and the rest of the tool (integrity rules, Python).
``--nvcc-phases`` adds one ``nvcc -time`` run of the kernel (cudafe++, cicc,
ptxas, fatbinary, host compiler).

Where torch has no CUDA libraries (a CPU build of torch), the link step needs
``libc10_cuda``/``libtorch_cuda``: empty stand-ins are linked instead
(``--stub-missing-libs``, on by default), so the link is timed against the
CPU torch libraries only and is a lower bound of the GPU host's.

Usage (nvcc needed, GPU not)::

    python benchmarks/compile_latency.py --task swish --repeats 7 --out results/compile_latency.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _task(name: str):
    from cuda_agent.harness.tasks import load_task_file

    # The probe runs get_inputs() on the CPU: the compile path needs the manifest, not a device.
    return load_task_file(REPO / "examples" / "tasks" / f"{name}.py", id=f"examples/{name}", device="cpu")


def _stub_missing_cuda_libs(folder: Path) -> list[str]:
    """Empty ``libc10_cuda.so``/``libtorch_cuda.so`` in ``folder`` when torch lacks them; put on LIBRARY_PATH."""
    from torch.utils import cpp_extension

    libdirs = [Path(d) for d in cpp_extension.library_paths()]
    made = []
    for name in ("c10_cuda", "torch_cuda"):
        if any((d / f"lib{name}.so").exists() for d in libdirs):
            continue
        folder.mkdir(parents=True, exist_ok=True)
        src = folder / "empty.c"
        src.write_text("void cuda_agent_link_stub(void) {}\n")
        subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(folder / f"lib{name}.so")], check=True)
        made.append(name)
    if made:
        os.environ["LIBRARY_PATH"] = f"{folder}:{os.environ['LIBRARY_PATH']}" if os.environ.get("LIBRARY_PATH") else str(folder)
    return made


class NinjaLog:
    """New ``.ninja_log`` entries since the last read: target basename -> milliseconds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.is_file() else 0

    def new_entries(self) -> dict[str, int]:
        if not self.path.is_file():
            return {}
        with open(self.path) as fh:
            fh.seek(self.offset)
            text = fh.read()
            self.offset = fh.tell()
        out: dict[str, int] = {}
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            parts = line.split("\t")
            if len(parts) >= 4:
                out[Path(parts[3]).name] = int(parts[1]) - int(parts[0])
        return out


def _touch(root: Path, rel: str, n: int, kind: str) -> None:
    """Edit ``rel``: a comment (as env_latency.py does) or, with ``kind='code'``, a new function too.

    A comment leaves the object file and the module byte-identical (the integrity rules then
    reuse what they read); a code edit changes both, like an agent's edit.
    """
    path = root / rel
    text = path.read_text().rstrip("\n").split("\n// edit ")[0] + f"\n// edit {n}\n"
    if kind == "code":
        text += f'extern "C" int cuda_agent_edit_{n}() {{ return {n}; }}\n'
    path.write_text(text)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_compile(backend, ws, task, log: NinjaLog) -> dict:
    cpu0, t0 = _children_cpu_s(), time.perf_counter()
    result = backend.compile(ws, task)
    total = time.perf_counter() - t0
    cpu = _children_cpu_s() - cpu0
    if not result.passed:
        raise SystemExit(f"compile failed: {result.summary_for_agent()}")
    build = result.diagnostics.build
    seconds = build.seconds if build else 0.0
    return {
        "tool_s": total,
        "helper_cpu_s": cpu,  # CPU of unsandboxed helpers (nm, c++filt, stand-in links); the sandboxed compilers are not counted
        "build_s": seconds,  # build_extension's own wall time
        "after_build_s": total - seconds,  # integrity rules, result, Python
        "translation_units": build.steps if build else None,
        "ninja_ms": log.new_entries(),
    }


def _nvcc_phases(build_dir: Path, source: Path) -> dict[str, float]:
    """One ``nvcc -time`` run of ``source`` with the build's own flags: phase -> ms."""
    import shlex

    text = (build_dir / "build.ninja").read_text()
    flags = next(line.split(" = ", 1)[1] for line in text.splitlines() if line.startswith("nvccflags = "))
    nvcc = next(line.split(" = ", 1)[1] for line in text.splitlines() if line.startswith("nvcc = "))
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "t.csv"
        cmd = [*shlex.split(nvcc), *shlex.split(flags.replace("$$", "$")), "-time", str(csv), "-c", str(source), "-o", str(Path(tmp) / "x.o")]
        subprocess.run(cmd, check=True, capture_output=True)
        phases: dict[str, float] = {}
        for line in csv.read_text().splitlines()[1:]:
            cols = [c.strip() for c in line.split(",")]
            if len(cols) >= 8 and cols[7] == "ms":
                phases[cols[1]] = phases.get(cols[1], 0.0) + float(cols[6])
        return phases


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="swish")
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--arch", default="sm_90a", help="CUDA arch to build for (no device needed).")
    parser.add_argument("--repeats", type=int, default=7, help="Edits per kind (medians reported).")
    parser.add_argument("--edit", choices=["code", "comment"], default="code",
                        help="What an edit changes: a new function (object and module change) or a comment only.")
    parser.add_argument("--isolation", choices=["auto", "bwrap", "process"], default="auto")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="Workspace, build and cache folder (default: a fresh one under /var/tmp; the "
                             "compiler sandbox hides /tmp). Reuse one to keep the shared binding object.")
    parser.add_argument("--no-stub-missing-libs", dest="stub_libs", action="store_false",
                        help="Do not stand in for libc10_cuda/libtorch_cuda when torch lacks them.")
    parser.add_argument("--nvcc-phases", action="store_true", help="Also time nvcc's phases once (nvcc -time).")
    parser.add_argument("--out", type=Path, default=None, help="JSON file to write.")
    args = parser.parse_args()

    from cuda_agent.plugins.backends._common import KernelBackendConfig

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="compile-latency-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    stubbed = _stub_missing_cuda_libs(work / "link-stubs") if args.stub_libs and args.backend == "cuda" else []
    config = KernelBackendConfig(
        arch=args.arch if args.backend == "cuda" else None,
        build_cache=work / "cache",
        build_root=work / "build",
        isolation=args.isolation,
    )
    if args.backend == "cuda":
        from cuda_agent.plugins.backends.cuda import CudaBackend as Backend
    else:
        from cuda_agent.plugins.backends.cpu import CpuBackend as Backend
    backend = Backend(config)
    task = _task(args.task)
    ws_root = work / "ws"
    if not ws_root.exists():
        ws = backend.prepare_workspace(task, ws_root)
        sol = REPO / "examples" / "solutions" / args.backend / args.task
        for p in sorted(sol.rglob("*")):
            if p.is_file():
                ws.write(str(p.relative_to(sol)), p.read_text())
    else:
        from cuda_agent.harness.layout import PROTECTED_FILES
        from cuda_agent.harness.workspace import ConfinedWorkspace

        ws = ConfinedWorkspace(ws_root, protected=PROTECTED_FILES)
    build_dir = backend.build_dir_for(ws_root)
    t0 = time.perf_counter()
    first = backend.compile(ws, task)
    if not first.passed:
        raise SystemExit(f"first compile failed: {first.summary_for_agent()}")
    report: dict = {
        "task": args.task, "backend": args.backend, "arch": args.arch, "stubbed_libs": stubbed, "edit": args.edit,
        "first_compile_s": time.perf_counter() - t0, "isolation": first.isolation, "cpus": os.cpu_count(),
    }
    log = NinjaLog(build_dir / ".ninja_log")
    suffix = ".cu" if args.backend == "cuda" else ".cpp"
    edits = {"kernel_edit": f"kernels/{args.task}{suffix}", "binding_edit": f"kernels/{args.task}_binding.cpp"}
    counter = 0
    for label, rel in [*edits.items(), ("noop", None)]:
        rows = []
        for _ in range(args.repeats):
            counter += 1
            if rel is not None:
                _touch(ws_root, rel, counter, args.edit)
            rows.append(_timed_compile(backend, ws, task, log))
        targets = sorted({t for r in rows for t in r["ninja_ms"]})
        report[label] = {
            "median_s": {k: _median(rows, k) for k in ("tool_s", "build_s", "after_build_s", "helper_cpu_s")},
            "median_ninja_ms": {t: statistics.median(r["ninja_ms"].get(t, 0) for r in rows) for t in targets},
            "runs": rows,
        }
    if args.nvcc_phases and args.backend == "cuda":
        report["nvcc_phases_ms"] = _nvcc_phases(build_dir, ws_root / edits["kernel_edit"])
    for label in (*edits, "noop"):
        med = report[label]["median_s"]
        print(f"{label:13s} compile tool {med['tool_s']:.3f} s  build {med['build_s']:.3f} s  "
              f"after build {med['after_build_s']:.3f} s  helper CPU {med['helper_cpu_s']:.3f} s  | ninja ms: "
              + "  ".join(f"{t} {v:.0f}" for t, v in report[label]["median_ninja_ms"].items()))
    if "nvcc_phases_ms" in report:
        print("nvcc phases ms: " + "  ".join(f"{k} {v:.0f}" for k, v in report["nvcc_phases_ms"].items()))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
