"""Preflight of a GPU session: can the CUDA backend build, load and verify an example solution here?

Builds ``examples/solutions/cuda/swish`` with the CUDA backend and verifies it, first with the link stand-ins
(the default), and, if that fails, again with the compiler's default linker (``CUDA_AGENT_LINKER=default``),
then also without the stand-ins (``CUDA_AGENT_NO_LINK_STUBS=1``). Prints one ``PREFLIGHT`` line
and writes ``--env-file``: the ``export`` lines the rest of the session must use (empty when the defaults work),
so a failure of one build setting does not spend a whole device session on failing parts.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
from pathlib import Path
from cuda_agent.harness.tasks import load_task_file
from cuda_agent.plugins.backends.cuda import CudaBackend
repo, root = Path(sys.argv[1]), Path(sys.argv[2])
task = load_task_file(repo / "examples/tasks/swish.py", id="examples/swish", sizes="full", device="cuda")
backend = CudaBackend()
ws = backend.prepare_workspace(task, root / "ws")
sol = repo / "examples/solutions/cuda/swish"
for p in sorted(sol.rglob("*")):
    if p.is_file():
        ws.write(str(p.relative_to(sol)), p.read_text())
t = time.perf_counter()
built = backend.compile(ws, task)
print("compile", built.status, round(time.perf_counter() - t, 2), flush=True)
result = backend.verify(ws, task)
print("verify", result.status, result.summary_for_agent()[:400], flush=True)
backend.close()
sys.exit(0 if result.passed else 1)
"""


def attempt(env_extra: dict[str, str], timeout_s: float) -> tuple[bool, str, float]:
    env = {**os.environ, **env_extra}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="preflight-") as tmp:
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD, str(REPO), tmp], env=env, capture_output=True,
                                  text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout_s:.0f} s", time.perf_counter() - t0
    tail = (proc.stdout + proc.stderr)[-1500:]
    return proc.returncode == 0, tail, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env-file", type=Path, required=True, help="Where to write the session's export lines.")
    ap.add_argument("--timeout-s", type=float, default=150.0)
    args = ap.parse_args()
    tries = [("defaults", {}), ("default linker", {"CUDA_AGENT_LINKER": "default"}),
             ("default linker, no link stand-ins", {"CUDA_AGENT_LINKER": "default", "CUDA_AGENT_NO_LINK_STUBS": "1"})]
    for label, extra in tries:
        ok, tail, secs = attempt(extra, args.timeout_s)
        print(f"--- {label} ({secs:.1f} s): {'ok' if ok else 'FAILED'}\n{tail}", flush=True)
        if ok:
            args.env_file.write_text("".join(f"export {k}={v}\n" for k, v in extra.items()))
            print(f"PREFLIGHT ok with {label}")
            return 0
    args.env_file.write_text("")
    print("PREFLIGHT failed with every setting")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
