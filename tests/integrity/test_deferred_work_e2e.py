"""Found by session 37's red team (CPU backend, ``cuda-agent score``, task gemm_bias_relu), fixed since: three ways
to run the kernel outside the timed call, each graded correct with reward 3 (the same kernel computing inside the
call: reward 1, 0.11x eager).

- An interval timer's SIGALRM handler computed the next output from the staged inputs while the harness flushed
  caches before the timer started; the timed call only compared and copied.
- The deleter of the previous output's storage (a hand-built ``c10::Storage``) did the same: the runner dropped
  the previous outputs after staging the next inputs.
- A one-shot SIGALRM handler wrote the returned output after the timer's end, before the runner fingerprinted it.

Now signal and timer calls are refused in source and binary (``T10.cpp.signal``, ``T10.binary.signal``), the
runner blocks those signals and the guard watches them (``T10.runtime.signal_state``,
``tests/integrity/test_runtime_guards.py``), hand-built tensors and storages are refused
(``T11.cpp.tensor_construction``), and the previous outputs are released before the next inputs are staged
(``tests/sandbox/test_output_release_order.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrity.conftest import score_one
from tests.integrity.deferred_work import attacks as A

pytestmark = pytest.mark.slow


def _score(tmp_path: Path, model_new: str, kernel: str, binding: str) -> dict:
    return score_one(tmp_path, "gemm_bias_relu", {"model_new.py": model_new, "kernels/gemm.cpp": kernel,
                                                  "kernels/gemm_binding.cpp": binding})


def test_the_control_computing_inside_the_call_is_correct_and_slow(tmp_path: Path) -> None:
    row = _score(tmp_path, A.MODEL_NEW_GEMM, A.KERNEL_GEMM_HONEST, A.BINDING_GEMM)
    assert row["status"] == "correct" and row["speedup_eager"] < 0.5, row


@pytest.mark.parametrize("kernel", ["KERNEL_GEMM_SIGALRM", "KERNEL_GEMM_DEFERRED"])
def test_a_signal_handler_computing_ahead_or_after_the_call_is_refused(tmp_path: Path, kernel: str) -> None:
    row = _score(tmp_path, A.MODEL_NEW_GEMM, getattr(A, kernel), A.BINDING_GEMM)
    # Before: 'correct', reward 3.0.
    assert row["status"] == "rejected" and row["rule"] == "T10.cpp.signal", row


def test_a_storage_deleter_computing_the_next_output_is_refused(tmp_path: Path) -> None:
    row = _score(tmp_path, A.MODEL_NEW_GEMM_RET, A.KERNEL_GEMM_DELETER, A.BINDING_GEMM_DELETER)
    # Before: 'correct', reward 3.0.
    assert row["status"] == "rejected" and row["rule"] == "T11.cpp.tensor_construction", row
