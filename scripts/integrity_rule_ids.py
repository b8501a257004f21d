"""Record the rule id every fixture under ``tests/integrity`` gets, to compare two states of the harness.

Usage::

    python scripts/integrity_rule_ids.py OUT.json            # record
    python scripts/integrity_rule_ids.py OUT.json --compare BEFORE.json   # record, then diff (exit 1 on a change)

What is recorded, per fixture (its path under tests/integrity):

- ``static``: the rule ids of the static layer that judges it (python allowlist, C++ source rules, or the binary
  audit of a plain ``g++ -shared`` build);
- ``evaluator`` (python fixtures only): ``[status, rule]`` of the CPU evaluator's ``verify`` running the fixture as
  ``model_new.py`` on a relu task with a small real extension (the runner, the runtime guard, the trusted checks:
  the path the harness refactors of issue 23 change);
- ``runtime:<scenario>``: the rule ids of ``tests/integrity/runtime_scenarios.py``.

It takes minutes on two cores (one verify per python fixture). Issue 23 asks that the ids stay identical across the
split of the trusted side; differences in ``static`` come from changes to ``harness/integrity`` itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "integrity"

RELU_TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.randn(8, 256)]


    def get_init_inputs():
        return []
    """
)

KERNELS = {
    "ops.cpp": "#include <cstdint>\nvoid relu_cpu(const float* x, float* y, int64_t n) {\n"
               "  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;\n}\n",
    "ops_binding.cpp": '#include "../binding_registry.h"\nvoid relu_cpu(const float* x, float* y, int64_t n);\n'
                       "void relu_forward(const at::Tensor& x, const at::Tensor& out) {\n"
                       "  relu_cpu(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), x.numel());\n}\n"
                       "REGISTER_BINDING(relu_forward, relu_forward);\n",
}


def _files(folder: Path, *suffixes: str) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in suffixes) if folder.is_dir() else []


def static_ids(scratch: Path) -> dict[str, list[str]]:
    """Rule ids of the static layers, per fixture."""
    from cuda_agent.harness.integrity import check_binary, check_cpp_text, check_model_new_source

    out: dict[str, list[str]] = {}
    for sub in ("cheats", "honest"):
        for path in _files(CORPUS / sub / "python", ".py"):
            out[str(path.relative_to(CORPUS))] = sorted({v.rule for v in check_model_new_source(path.read_text(), "model_new.py")})
        for path in _files(CORPUS / sub / "cpp", ".cpp", ".cu", ".cuh", ".h"):
            out[str(path.relative_to(CORPUS))] = sorted({v.rule for v in check_cpp_text(path.read_text(), f"kernels/{path.name}")})
        for path in _files(CORPUS / sub / "binary", ".cpp"):
            so = scratch / f"{sub}-{path.stem}.so"
            proc = subprocess.run(["g++", "-O1", "-fPIC", "-fopenmp", "-std=c++17", "-shared", str(path), "-o", str(so)],
                                  capture_output=True, text=True, check=False)
            key = str(path.relative_to(CORPUS))
            out[key] = (sorted({v.rule for v in check_binary(so, "cpu")}) if proc.returncode == 0
                        else [f"compile failed: {proc.stderr[-200:]}"])
    return out


def evaluator_ids(scratch: Path) -> dict[str, list[str | None]]:
    """``[status, rule]`` of the CPU evaluator's verify on every python fixture."""
    from cuda_agent.harness.build import build_extension
    from cuda_agent.harness.evaluator import Evaluator
    from cuda_agent.harness.layout import binding_sources
    from cuda_agent.schemas.task import TaskManifest

    kit = scratch / "kit" / "ws"
    (kit / "kernels").mkdir(parents=True)
    for rel, text in binding_sources().items():
        (kit / rel).write_text(text)
    for rel, text in KERNELS.items():
        (kit / "kernels" / rel).write_text(text)
    (kit / "model_new.py").write_text("")
    outcome = build_extension(kit, "cpu", kit.parent / "build", timeout_s=900)
    if not outcome.ok or outcome.so_path is None:
        raise SystemExit(f"building the kit failed:\n{outcome.log}")
    task = TaskManifest.from_code("tests/relu", RELU_TASK)
    out: dict[str, list[str | None]] = {}
    with Evaluator("cpu") as ev:
        for sub in ("cheats", "honest"):
            for path in _files(CORPUS / sub / "python", ".py"):
                ws = scratch / "ws" / sub / path.stem
                ws.mkdir(parents=True)
                (ws / "model.py").write_text(RELU_TASK)
                (ws / "model_new.py").write_text(path.read_text())
                result = ev.verify(task, ws, outcome.so_path)
                out[str(path.relative_to(CORPUS))] = [result.status.value, result.rule]
                print(f"{path.name}: {result.status.value} {result.rule}", file=sys.stderr, flush=True)
    return out


def runtime_ids(scratch: Path) -> dict[str, list[str]]:
    """Rule ids of tests/integrity/runtime_scenarios.py, per scenario."""
    sos = []
    for src in (CORPUS / "cheats" / "runtime" / "native_thread.cpp", CORPUS / "honest" / "runtime" / "openmp_relu.cpp"):
        so = scratch / f"{src.stem}.so"
        subprocess.run(["g++", "-O1", "-fPIC", "-fopenmp", "-std=c++17", "-shared", str(src), "-o", str(so)], check=True)
        sos.append(str(so))
    proc = subprocess.run([sys.executable, str(CORPUS / "runtime_scenarios.py"), *sos], capture_output=True, text=True,
                          timeout=1800, check=False)
    if proc.returncode != 0:
        return {"runtime_scenarios": [f"failed: {proc.stderr[-500:]}"]}
    return {f"runtime:{k}": sorted(v) for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def main(argv: list[str] | None = None) -> int:
    """Record (and optionally compare)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--compare", type=Path, help="an earlier record: print every fixture whose ids differ")
    p.add_argument("--skip-evaluator", action="store_true", help="static and runtime layers only (seconds)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rule-ids-") as tmp:
        scratch = Path(tmp)
        record: dict[str, object] = {"static": static_ids(scratch), "runtime": runtime_ids(scratch)}
        if not args.skip_evaluator:
            record["evaluator"] = evaluator_ids(scratch)
    args.out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    changed = 0
    for layer, now in record.items():
        then = before.get(layer, {})
        for key in sorted(set(now) | set(then)):  # type: ignore[arg-type]
            if now.get(key) != then.get(key):  # type: ignore[union-attr]
                changed += 1
                print(f"{layer} {key}: {then.get(key)} -> {now.get(key)}")  # type: ignore[union-attr]
    print(f"{changed} fixture(s) changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
