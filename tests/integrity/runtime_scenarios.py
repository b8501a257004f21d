"""Runs candidate code against the runtime guards, one forked child per scenario; prints JSON verdicts.

Usage: python runtime_scenarios.py NATIVE_THREAD_SO OPENMP_SO. Each scenario writes a real candidate
module, imports it the way the candidate runner does (between two guard snapshots), optionally calls
its ModelNew.forward under ``audit_ops``, and reports the rule ids found. Children are forked from a
process that never touched CUDA, after torch is imported once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

import torch

from cuda_agent.harness import checksum, compare  # noqa: F401 - imported before the snapshot, as the runner does
from cuda_agent.harness.integrity import runtime
from cuda_agent.harness.integrity.signal_guard import WATCHED_SIGNALS

NATIVE_SO, OPENMP_SO = sys.argv[1], sys.argv[2]

HEAD = "import torch\nimport torch.nn as nn\n"
FORWARD_HONEST = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
                  "        out.copy_(x.contiguous().view(-1).view(x.shape))\n        return out\n")

SCENARIOS: dict[str, str] = {
    "clean": HEAD + FORWARD_HONEST,
    "timer_perf_counter": HEAD + "import time\ntime.perf_counter = lambda: 0.0\n" + FORWARD_HONEST,
    "timer_event_elapsed": HEAD + "torch.cuda.Event.elapsed_time = lambda self, end: 0.001\n" + FORWARD_HONEST,
    "timer_synchronize": HEAD + "torch.cuda.synchronize = lambda *args: None\n" + FORWARD_HONEST,
    "timer_module_swap": HEAD + "import sys, types\nsys.modules['time'] = types.SimpleNamespace()\n" + FORWARD_HONEST,
    "checker_allclose": HEAD + "torch.allclose = lambda *a, **k: True\n" + FORWARD_HONEST,
    "checker_assert_close": HEAD + "torch.testing.assert_close = lambda *a, **k: None\n" + FORWARD_HONEST,
    "checker_module_call": HEAD + "nn.Module.__call__ = lambda self, *a: a[0]\n" + FORWARD_HONEST,
    "checker_fingerprint": HEAD + "import cuda_agent.harness.checksum as c\nc.device_checksum = lambda raw: 0\n"
                           + FORWARD_HONEST,
    "checker_int_mm": HEAD + "torch._int_mm = lambda a, b: torch.zeros(a.shape[0], b.shape[1], dtype=torch.int32)\n"
                      + FORWARD_HONEST,
    "flag_tf32": HEAD + "torch.backends.cuda.matmul.allow_tf32 = True\n" + FORWARD_HONEST,
    "flag_precision": HEAD + "torch.set_float32_matmul_precision('medium')\n" + FORWARD_HONEST,
    "flag_default_dtype": HEAD + "torch.set_default_dtype(torch.float64)\n" + FORWARD_HONEST,
    "env_var": HEAD + "import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n" + FORWARD_HONEST,
    "python_thread": HEAD + "import threading\n_ev = threading.Event()\n"
                     "threading.Thread(target=_ev.wait, name='filler', daemon=True).start()\n" + FORWARD_HONEST,
    "native_thread": HEAD + f"import ctypes\nctypes.CDLL({NATIVE_SO!r}).start_background()\n" + FORWARD_HONEST,
    "openmp_pool_honest": HEAD + f"import ctypes\n_lib = ctypes.CDLL({OPENMP_SO!r})\n"
                          "_x = torch.randn(1 << 16)\n_y = torch.empty_like(_x)\n"
                          "_lib.relu(ctypes.c_void_p(_x.data_ptr()), ctypes.c_void_p(_y.data_ptr()), _x.numel())\n"
                          + FORWARD_HONEST,
    "trace_hook": HEAD + "import sys\nsys.settrace(lambda *a: None)\n" + FORWARD_HONEST,
    "torch_function_mode": HEAD + "from torch.overrides import TorchFunctionMode\n"
                           "class _Spy(TorchFunctionMode):\n"
                           "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
                           "        return func(*args, **(kwargs or {}))\n"
                           "_Spy().__enter__()\n"
                           + FORWARD_HONEST,
    # op audit: compute the AST never saw (a callback looked up at run time, a tensor method)
    "audit_callback": HEAD + "_HOOKS = {'post': torch.relu}\n"
                      "class ModelNew(nn.Module):\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
                      "        return _HOOKS['post'](x)\n",
    "audit_tensor_method": HEAD + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                           "        return (x * 2).sum(dim=0)\n",
    "audit_matmul": HEAD + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x @ x.t()\n",
    # T15 at run time: a no-op x.float() on a float32 input is honest; casting below it is not, however it is spelt
    "cast_float_noop": HEAD + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                       "        x = x.contiguous().float()\n        out = torch.empty_like(x)\n"
                       "        return out.copy_(x)\n",
    "cast_half": HEAD + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                 "        return x.half().float()\n",
    "cast_copy_into_half": HEAD + "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                           "        low = torch.empty(x.shape, dtype=torch.bfloat16).copy_(x)\n"
                           "        return torch.empty_like(x).copy_(low)\n",
    # code outside the calls (session 37's red team): a handler, an armed timer, a signal the runner blocks let through
    "signal_handler": HEAD + "import signal\nsignal.signal(signal.SIGUSR2, lambda *a: None)\n" + FORWARD_HONEST,
    "signal_timer": HEAD + "import signal\nsignal.setitimer(signal.ITIMER_VIRTUAL, 30.0)\n" + FORWARD_HONEST,
    "signal_unblock": HEAD + "import signal\nsignal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})\n"
                      + FORWARD_HONEST,
}


def run(name: str, source: str, folder: Path) -> list[str]:
    # As the runner does before torch starts threads (SIGALRM stays deliverable here: main()'s watchdog uses it).
    signal.pthread_sigmask(signal.SIG_BLOCK, set(WATCHED_SIGNALS) - {signal.SIGALRM})
    # The child creates torch's worker threads itself: OpenMP pools do not survive fork().
    torch.ones(1 << 16).mul(2).sum()
    path = folder / f"{name}.py"
    path.write_text(source)
    before = runtime.take_guard_snapshot()
    spec = importlib.util.spec_from_file_location("model_new", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew()
    x = torch.randn(8, 8)
    with runtime.audit_ops(kernels=False) as ops:
        torch.nn.Module.__call__(model, x) if name != "checker_module_call" else model.forward(x)
    rules = [v.rule for v in runtime.compare_guard_snapshot(before, runtime.take_guard_snapshot())]
    rules += [v.rule for v in runtime.op_audit_violations(ops, "cpu", ops.casts, "float32")]
    return rules


def main() -> None:
    results: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in SCENARIOS.items():
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                signal.alarm(120)  # a wedged scenario fails alone instead of hanging the parent
                try:
                    payload = json.dumps(run(name, source, Path(tmp)))
                except BaseException as exc:  # report, never hang the parent
                    payload = json.dumps([f"ERROR {type(exc).__name__}: {exc}"])
                os.write(write_fd, payload.encode())
                os._exit(0)
            os.close(write_fd)
            with os.fdopen(read_fd) as reader:
                results[name] = json.loads(reader.read() or '["ERROR no output"]')
            os.waitpid(pid, 0)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
