"""The synthesis probe runs tasks (some LLM-written) sandboxed: real bubblewrap, real torch.

A task that writes outside its scratch folder or opens a network socket fails
inside the probe (its eager run reports the OS error) and the worker goes on
serving; normal tasks still pass; where bubblewrap is unusable the worker
falls back to a plain subprocess and says so in every report.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from cuda_agent.harness._bwrap import IsolationUnavailable, resolve_isolation
from cuda_agent.training.synthesis.execution_probe import ProbeSettings, ProbeWorker

pytestmark = pytest.mark.slow  # starts torch worker processes

needs_bwrap = pytest.mark.skipif(resolve_isolation("auto").level != "bwrap", reason="bubblewrap unusable here")


def task(forward_prefix: str) -> str:
    """A small elementwise task whose forward first runs ``forward_prefix``."""
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        f"        {forward_prefix}\n        return torch.tanh(x) * 2.0 + x\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 32)]\n\n\ndef get_init_inputs():\n    return []\n"
    )


@needs_bwrap
def test_writes_outside_scratch_and_network_fail_inside_the_probe(probe_worker: ProbeWorker) -> None:
    assert probe_worker.isolation.level == "bwrap"
    # A host folder we can write to ourselves (not under the sandbox's private /tmp).
    outside = Path(__file__).resolve().parent / f".probe-escape-{uuid.uuid4().hex}.txt"
    try:
        r = probe_worker.probe("escape", task(f"open({str(outside)!r}, 'w').write('escaped')"))
        assert r.status == "ok" and r.isolation == "bwrap"
        assert not r.eager_ok and "Read-only file system" in (r.eager_error or ""), r.eager_error
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)

    r = probe_worker.probe("net", task("import socket; socket.create_connection(('1.1.1.1', 53), timeout=3).close()"))
    assert not r.eager_ok and "OSError" in (r.eager_error or ""), r.eager_error

    # Honest tasks still pass in the same worker, and the scratch folder (cwd) is writable.
    r = probe_worker.probe("scratch", task("open('scratch.txt', 'w').write('fine')"))
    assert r.eager_ok and r.compile_ok and r.isolation == "bwrap", r.eager_error
    assert probe_worker.scratch is not None and (probe_worker.scratch / "scratch.txt").read_text() == "fine"


@needs_bwrap
def test_scratch_folder_is_fresh_after_a_restart(probe_worker: ProbeWorker) -> None:
    settings = probe_worker.settings.model_copy(update={"compile_backend": None})
    worker = ProbeWorker(settings)
    try:
        assert worker.probe("leave", task("open('left.txt', 'w').write('x')")).eager_ok
        first = worker.scratch
        assert first is not None and (first / "left.txt").exists()
        assert worker.probe("die", task("import os; os._exit(3)")).status == "crash"
        assert not first.exists()  # a crashed child's scratch is dropped with it
        r = worker.probe("look", task("assert not __import__('os').path.exists('left.txt')"))
        assert r.eager_ok and worker.scratch is not None and worker.scratch != first, r.eager_error
    finally:
        worker.close()
    assert worker.scratch is None


def test_falls_back_to_a_plain_process_and_records_it(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-bwrap")
    settings = ProbeSettings(device="cpu", compile_backend=None, timeout_s=120, warmup=0, min_repeats=3,
                             max_repeats=3, timing_budget_s=0.01, bwrap_path=missing)
    with ProbeWorker(settings) as worker:
        assert worker.isolation.level == "process" and missing in worker.isolation.reason
        r = worker.probe("good", task("pass"))
        assert r.status == "ok" and r.eager_ok and r.isolation == "process"
    with pytest.raises(IsolationUnavailable, match="isolation 'bwrap' requested"):
        ProbeWorker(settings.model_copy(update={"isolation": "bwrap"})).start()
