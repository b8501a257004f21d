"""Faults are contained and the next request is served (CPU).

Each faulty candidate runs in its own one-shot sandboxed process; after it,
an honest candidate evaluated by the same Evaluator must still pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.conftest import HONEST_RELU_MODEL_NEW

pytestmark = pytest.mark.slow


def _forward(body: str, prelude: str = "") -> str:
    return f"""
import torch
import torch.nn as nn
import cuda_extension
{prelude}

class ModelNew(nn.Module):
    def forward(self, x):
{body}
"""


@pytest.fixture(scope="module")
def fault_evaluator(make_evaluator) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """An evaluator with short call timeouts and a small memory limit."""
    ev = make_evaluator(limits={"call_timeout_s": 8, "memory_mb": 1200}, verify={"input_sets": 2},
                        integrity={"determinism_check": False})
    yield ev
    ev.close()


def _then_honest_passes(ev, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    r = ev.verify(tasks.relu, make_ws(HONEST_RELU_MODEL_NEW), kit)
    assert r.status.value == "correct", r.summary_for_agent()


def test_segfault_is_contained(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _forward("        import ctypes\n        ctypes.string_at(0)\n        return x")
    r = fault_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "error"
    assert "SIGSEGV" in r.message
    _then_honest_passes(fault_evaluator, make_ws, kit, tasks)


def test_infinite_loop_times_out(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _forward("        while True:\n            pass")
    r = fault_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "timeout"
    _then_honest_passes(fault_evaluator, make_ws, kit, tasks)


def test_memory_blowup_is_killed(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    body = (
        "        hog = []\n"
        "        for _ in range(400):\n"
        "            hog.append(torch.ones(25_000_000))\n"  # 100 MB each, touched
        "        return x"
    )
    r = fault_evaluator.verify(tasks.relu, make_ws(_forward(body)), kit)
    assert r.status.value == "error"
    assert "memory" in r.message and "limit" in r.message
    _then_honest_passes(fault_evaluator, make_ws, kit, tasks)


def test_one_watchdog_thread_kills_the_blowup_while_honest_candidates_live(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    """Every candidate of the process is watched by one thread (session 19: a thread per candidate, 20 polls a
    second each, took the generation thread's GIL in proportion to the episodes in flight). With honest
    candidates alive beside it, the blowup is still killed."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from cuda_agent.harness.sandbox import WATCHDOGS

    body = (
        "        hog = []\n"
        "        for _ in range(400):\n"
        "            hog.append(torch.ones(25_000_000))\n"
        "        return x"
    )
    with ThreadPoolExecutor(3) as ex:
        honest = [ex.submit(fault_evaluator.verify, tasks.relu, make_ws(HONEST_RELU_MODEL_NEW), kit) for _ in range(2)]
        blowup = ex.submit(fault_evaluator.verify, tasks.relu, make_ws(_forward(body)), kit)
        results = [f.result() for f in honest]
        r = blowup.result()
    assert r.status.value == "error" and "memory" in r.message and "limit" in r.message
    assert [x.status.value for x in results] == ["correct", "correct"]
    assert [t.name for t in threading.enumerate()].count("memory-watchdog") == 1
    assert WATCHDOGS.rounds > 0


def test_huge_output_and_flood_of_prints(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    body = "        print('x' * 5_000_000)\n        return torch.empty(1 << 30)"
    r = fault_evaluator.verify(tasks.relu, make_ws(_forward(body)), kit)
    assert r.status.value == "incorrect"
    assert any(e.check == "shape" for e in r.errors)
    _then_honest_passes(fault_evaluator, make_ws, kit, tasks)


def test_write_outside_workspace_is_refused(fault_evaluator, make_ws, kit, tasks, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if fault_evaluator.isolation != "bwrap":
        pytest.skip("needs bubblewrap isolation")
    target = tmp_path / "escaped.txt"
    home_target = Path.home() / f"cuda-agent-escape-{tmp_path.name}.txt"
    body = (
        f"        open({str(target)!r}, 'w').write('escaped')\n"
        "        return x"
    )
    ws = make_ws(_forward(body))
    r = fault_evaluator.verify(tasks.relu, ws, kit)
    assert r.status.value == "error" and not target.exists()
    body2 = f"        open({str(home_target)!r}, 'w').write('x')\n        return x"
    r2 = fault_evaluator.verify(tasks.relu, make_ws(_forward(body2)), kit)
    assert r2.status.value == "error" and not home_target.exists()
    body3 = "        open(__file__, 'a').write('# edited')\n        return x"
    r3 = fault_evaluator.verify(tasks.relu, make_ws(_forward(body3)), kit)
    assert r3.status.value == "error"
    _then_honest_passes(fault_evaluator, make_ws, kit, tasks)


def test_network_is_unreachable(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    if fault_evaluator.isolation != "bwrap":
        pytest.skip("needs bubblewrap isolation (own network namespace)")
    body = (
        "        import socket\n"
        "        socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
        "        return x"
    )
    r = fault_evaluator.verify(tasks.relu, make_ws(_forward(body)), kit)
    assert r.status.value == "error"
    assert "unreachable" in r.message.lower() or "OSError" in r.message
    _then_honest_passes(fault_evaluator, make_ws, kit, tasks)


def test_exit_in_forward_is_contained(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    code = _forward("        import os\n        os._exit(3)")
    r = fault_evaluator.verify(tasks.relu, make_ws(code), kit)
    assert r.status.value == "error" and "exited with code 3" in r.message


def test_a_forged_reply_on_the_runners_channel_is_a_protocol_error(fault_evaluator, make_ws, kit, tasks) -> None:  # type: ignore[no-untyped-def]
    """The candidate's process can write to the reply pipe; what it writes is validated against the reply the
    trusted side expects (here a 'load' reply with a field no reply has), and a line that does not fit ends the
    evaluation as a protocol error, never as data the trusted side uses."""
    prelude = ("import os\n"
               "_out = int(os.environ['CUDA_AGENT_RUNNER_FDS'].split(',')[1])\n"
               "os.write(_out, b'{\"ok\": true, \"verdict\": \"correct\"}\\n')\n")
    r = fault_evaluator.verify(tasks.relu, make_ws(_forward("        return x", prelude)), kit)
    assert r.status.value == "error" and "unreadable reply to 'load'" in r.message, r.message
    _then_honest_passes(fault_evaluator, make_ws, kit, tasks)
