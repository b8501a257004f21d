"""A deterministic, instant backend plugin for runner tests (resume after kill -9, concurrency).

The runner, the agent loop, the scripted/openai policies and the workspace
store are all real in those tests; only building and timing kernels is
replaced, because a real CPU build costs 15-40 s per candidate here. A
candidate is the workspace file ``solution.txt`` holding ``key=value`` words:

- ``syntax`` anywhere -> compile_error;
- ``status=correct|incorrect`` -> verify/grade verdict;
- ``speedup=X`` -> speedup vs eager X, vs compile 0.8 X;
- ``graded_speedup=Y`` -> the trusted grading pass measures Y instead (the agent's own timing was optimistic);
- ``nonneg_only`` -> fails a widened task (``...#widened``), like ReLU-as-identity.

``TOY_KILL_AT=n`` makes the process SIGKILL itself at its n-th backend call
(deterministic "random" kill points for the resume test).
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from cuda_agent.harness.workspace import ConfinedWorkspace
from cuda_agent.hookspecs import hookimpl
from cuda_agent.schemas.result import Baselines, CandidateResult, Status, Timing

_calls = 0
_lock = threading.Lock()


def _count_and_maybe_die() -> None:
    global _calls
    with _lock:
        _calls += 1
        n = _calls
    kill_at = os.environ.get("TOY_KILL_AT")
    if kill_at and n >= int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)


def _words(ws) -> dict[str, str]:
    path = Path(ws.root) / "solution.txt"
    text = path.read_text() if path.exists() else ""
    out = {}
    for word in text.split():
        k, _, v = word.partition("=")
        out[k] = v
    return out


class ToyBackend:
    """Judges ``solution.txt`` declarations instantly and deterministically."""

    name = "toy"
    skill = "cpu"
    kernel_suffix = ".txt"

    def availability(self):
        return True, "toy"

    def device_facts(self):
        return {"backend": "toy", "device": "toy"}

    def prepare_workspace(self, task, root):
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        (root / "model.py").write_text(task.code)
        return ConfinedWorkspace(root, protected=["model.py"])

    def _result(self, task, phase, ws, timed):
        _count_and_maybe_die()
        w = _words(ws)
        if "syntax" in w:
            return CandidateResult(task_id=task.id, phase=phase, status=Status.compile_error, message="syntax error")
        if phase == "compile":
            return CandidateResult(task_id=task.id, phase=phase, status=Status.correct)
        ok = w.get("status") == "correct" and not (task.id.endswith("#widened") and "nonneg_only" in w)
        result = CandidateResult(task_id=task.id, phase=phase, status=Status.correct if ok else Status.incorrect)
        if ok and timed and "speedup" in w:
            s = float(w["graded_speedup"] if phase == "grade" and "graded_speedup" in w else w["speedup"])
            result.timing = Timing(median_ms=1.0 / s, samples=10, method="toy")
            result.baselines = Baselines(eager=Timing(median_ms=1.0, method="toy"), compile=Timing(median_ms=0.8, method="toy"))
            result.speedup_eager, result.speedup_compile = s, 0.8 * s
        return result

    def compile(self, ws, task):
        return self._result(task, "compile", ws, False)

    def verify(self, ws, task):
        return self._result(task, "verify", ws, False)

    def profile(self, ws, task):
        return self._result(task, "profile", ws, True)

    def grade(self, ws, task):
        return self._result(task, "grade", ws, True)

    def close(self):
        pass


@hookimpl
def register_backends(register):
    """Register ``toy``."""
    register("toy", ToyBackend)
