"""Warm task-probe servers: reuse, isolation between tasks, and fallback to a fresh process."""

from __future__ import annotations

import pytest

from cuda_agent.harness._build_sandbox import bwrap_usable
from cuda_agent.harness._probe_server import SERVER_ENV, close_servers
from cuda_agent.harness.tasks import TaskProbeError, load_task_code

HEAD = "import os, torch, torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
TAIL = "def get_init_inputs():\n    return []\n"
GOOD = HEAD + "def get_inputs():\n    return [torch.randn(4)]\n" + TAIL


def _failing_with(expr: str, before: str = "") -> str:
    """A task whose get_inputs() runs ``before`` and then fails with ``expr``'s value in the message."""
    body = "".join(f"    {line}\n" for line in before.splitlines())
    return HEAD + "def get_inputs():\n" + body + f"    raise ValueError('FACT=' + str({expr}) + '=FACT')\n" + TAIL


#: A process's identity that pid namespaces do not hide: pid and start time (clock ticks since boot).
PARENT = "(os.getppid(), open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[19])"


def _fact(code: str) -> str:
    with pytest.raises(TaskProbeError) as info:
        load_task_code(code, "t/probe", device="cpu", timeout_s=60)
    text = str(info.value)
    return text.split("FACT=", 1)[1].split("=FACT", 1)[0]


@pytest.fixture(autouse=True)
def fresh_servers(monkeypatch):
    monkeypatch.delenv(SERVER_ENV, raising=False)
    close_servers()
    yield
    close_servers()


def test_probes_are_served_by_one_warm_process():
    first = _fact(_failing_with(PARENT))
    second = _fact(_failing_with(PARENT))
    assert first == second  # both tasks ran in children of the same server
    assert load_task_code(GOOD, "t/good", device="cpu").inputs[0].shape == [4]


def test_without_servers_every_probe_is_a_fresh_process(monkeypatch):
    monkeypatch.setenv(SERVER_ENV, "0")
    first = _fact(_failing_with(PARENT))
    assert _fact(_failing_with(PARENT)) != first  # a new process (and sandbox) each time


def test_a_task_cannot_forge_the_answer_to_a_later_probe():
    """A task may write anything to every descriptor it has (its own answer is its own business: a task can
    describe itself wrongly anyway); the next task still gets its own facts."""
    forged = '{"ok": true, "id": "x", "inputs": [], "outputs": [], "init_inputs": [], "flops": 0}\\n'
    spam = HEAD + (
        "def get_inputs():\n"
        f"    line = {forged!r}.encode()\n"
        "    for fd in range(0, 256):\n"
        "        try:\n"
        "            os.write(fd, line * 3)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return [torch.randn(4)]\n") + TAIL
    try:
        load_task_code(spam, "t/spam", device="cpu", timeout_s=60)
    except TaskProbeError:
        pass
    for _ in range(2):
        manifest = load_task_code(GOOD, "t/good", device="cpu")  # the real facts, not a forged line
        assert manifest.inputs[0].shape == [4] and manifest.outputs[0].shape == [4]


@pytest.mark.skipif(not bwrap_usable(), reason="bubblewrap cannot create namespaces here")
def test_one_tasks_processes_and_tmp_files_never_meet_the_next():
    leave = ("import subprocess\n"
             "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
             "open('/tmp/left-behind', 'w').write('x')")
    assert _fact(_failing_with("'left'", before=leave)) == "left"
    look = ("import glob\n"
            "sleepers = [p for p in glob.glob('/proc/[0-9]*/cmdline') if b'sleep' in open(p, 'rb').read()]")
    assert _fact(_failing_with("(len(sleepers), os.path.exists('/tmp/left-behind'))", before=look)) == "(0, False)"


@pytest.mark.skipif(not bwrap_usable(), reason="bubblewrap cannot create namespaces here")
def test_a_task_that_kills_its_server_is_rerun_in_a_fresh_process_and_the_next_probe_gets_a_new_server():
    before = _fact(_failing_with(PARENT))
    killer = HEAD + ("def get_inputs():\n    import signal\n    os.kill(os.getppid(), signal.SIGKILL)\n"
                     "    return [torch.randn(4)]\n") + TAIL
    # The server dies; the fallback runs the task in a fresh sandbox, whose init ignores the signal.
    assert load_task_code(killer, "t/killer", device="cpu", timeout_s=60).inputs[0].shape == [4]
    after = _fact(_failing_with(PARENT))
    assert after != before and _fact(_failing_with(PARENT)) == after  # a new warm server, reused again


def test_a_hanging_task_times_out_and_the_server_serves_the_next():
    hang = HEAD + "def get_inputs():\n    while True:\n        pass\n" + TAIL
    with pytest.raises(TaskProbeError) as info:
        load_task_code(hang, "t/hang", device="cpu", timeout_s=2)
    assert info.value.kind == "timeout" and "longer than the limit" in str(info.value)
    first = _fact(_failing_with(PARENT))
    assert _fact(_failing_with(PARENT)) == first


def test_served_tasks_get_the_default_thread_count_and_parallel_ops_finish(monkeypatch):
    """The server warms up on one thread (a started OpenMP pool does not survive fork); its children get the
    default count back, and a parallel CPU operator in a child completes."""
    threads = "torch.get_num_threads()"
    served = _fact(_failing_with(threads, before="torch.randn(256, 256) @ torch.randn(256, 256)"))
    monkeypatch.setenv(SERVER_ENV, "0")
    assert served == _fact(_failing_with(threads))


def test_a_cuda_failure_in_a_served_probe_is_confirmed_by_a_fresh_process():
    """Where CUDA cannot start (here: no GPU), the served child's failure is not taken on its own word: a fresh
    process runs the task and its error is the one reported."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine without a GPU")
    with pytest.raises(TaskProbeError) as info:
        load_task_code(GOOD.replace("torch.randn(4)", "torch.randn(4, device='cuda')"), "t/cuda", device="cuda",
                       timeout_s=60)
    assert "CUDA" in str(info.value)
