"""Session 42's timer red team (T8): the time the CPU runner reports is computed inside the candidate's process, and
native code there can write any of that process's memory (CPU backend, ``cuda-agent score``, reduced KernelBench
sizes, real builds and runners; ``_grade`` of tests/integrity/test_redteam_s42.py).

- **Every Python float equal to 1000.0 made smaller** (T8): the CPU timer computes ``host_ms = (perf() - t0) * 1e3``,
  and the ``1e3`` is a float object in the constants of ``DeviceTimer.time_call``'s code, in the runner's heap. On its
  first call (a verification call, whose time is not used) the kernel scans 4 GiB of address space around its own
  static counter for 24-byte objects ``[refcount][type][1000.0]`` whose type's name (the type object's fourth word)
  is ``"float"``, and writes ``1000.0 * scale`` into them. No /proc, no clock, no ``mprotect``: readable memory is
  found by ``write``-ing it into a pipe, which copies what is readable and returns EFAULT where nothing is mapped
  (``pipe``, ``write`` and ``read`` are declared by hand; ``<unistd.h>`` is refused but the names are not). Every
  Python identity and every watched clock's code stays as it was, so the guards see nothing; the wall-clock check
  bounds a reported time only from above. An honest GEMM at 0.6x eager reported a fifth of its time and was graded
  **reward 2** (speedup 3.4); a GEMM 300 times slower reported a thousandth and was graded reward 2 (3.6).

  Now the parent also bounds the reported times from below (``harness/unaccounted_wall.py``): what a round's timed
  calls leave of the parent's wall, beyond their reported time, is compared with what the baselines' batches (the
  same timer, no candidate code) leave per call, plus the runner's own per-call and per-byte work. The slow GEMM's
  calls left 38-60 ms a call unaccounted where the rule allowed 11-22 ms: refused, ``T8.runtime.timer_patched``
  (3 runs of 3); 34 honest passes stayed at least 7.8 ms under it (numbers in the module's docstring).

Open (a strict xfail below): a lie smaller than the harness's own cost per call. The fast GEMM hides 0.2 ms a call
under 3-12 ms of flush, messages and fingerprints (on this 2-core host the CPU timer's 32 MiB flush alone takes
2-15 ms), so it is still graded reward 2. The rule bounds what a lie can hide to about its allowance per call; what
would close it is a clock the candidate's process cannot write (timestamps the parent reads, or a runner that
cannot scan its own memory: a seccomp policy refusing ``write`` from non-harness code is not practical).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import cuda_agent.harness.unaccounted_wall as U
from cuda_agent.harness.integrity import check_cpp_text
from tests.integrity.test_redteam_s42 import _grade

STEM = "1_Square_matrix_multiplication_"

_SCAN = r"""
#include <cstdint>
#include <cstring>

extern "C" int pipe(int* fds);
extern "C" long write(int fd, const void* buf, unsigned long n);
extern "C" long read(int fd, void* buf, unsigned long n);

namespace {
// Bytes readable from `at` on (at most n): the kernel copies them into the pipe, or fails with EFAULT.
int64_t readable(const int* fds, uint64_t at, int64_t n) {
  long got = write(fds[1], reinterpret_cast<const void*>(at), static_cast<unsigned long>(n));
  if (got <= 0) return 0;
  char sink[4096];
  for (long left = got; left > 0;) {
    long r = read(fds[0], sink, static_cast<unsigned long>(left < 4096 ? left : 4096));
    if (r <= 0) break;
    left -= r;
  }
  return got;
}

bool names_float(const int* fds, uint64_t type) {
  if (type < 0x10000 || (type & 7) || readable(fds, type, 32) < 32) return false;
  uint64_t name;
  std::memcpy(&name, reinterpret_cast<const void*>(type + 24), 8);
  if (name < 0x10000 || readable(fds, name, 6) < 6) return false;
  return std::memcmp(reinterpret_cast<const void*>(name), "float", 6) == 0;
}

void scale_thousands(uint64_t near, double scale) {
  int fds[2];
  if (pipe(fds) != 0) return;
  const uint64_t thousand = 0x408F400000000000ull, span = 4ull << 30, chunk = 65536, page = 4096;
  const uint64_t mid = near & ~(chunk - 1);
  uint64_t float_type = 0;
  for (uint64_t at = mid - span / 2; at < mid + span / 2;) {
    const int64_t n = readable(fds, at, chunk) & ~int64_t(7);
    if (n <= 0) {
      at += page;
      continue;
    }
    uint64_t* w = reinterpret_cast<uint64_t*>(at);
    for (int64_t i = 2; i < n / 8; ++i) {
      if (w[i] != thousand || w[i - 2] == 0 || w[i - 2] > 100000) continue;
      if (float_type == 0 && names_float(fds, w[i - 1])) float_type = w[i - 1];
      if (w[i - 1] != float_type) continue;
      const double v = 1000.0 * scale;
      std::memcpy(&w[i], &v, 8);
    }
    at += static_cast<uint64_t>(n);
  }
}
}  // namespace
"""


def _gemm(scale: float | None, reps: int) -> str:
    """The honest GEMM of examples/solutions/kernelbench (computed ``reps`` times over), preceded on its first call by
    :data:`_SCAN` with ``scale`` (None: honest)."""
    patch = ("  static int64_t calls = 0;\n"
             f"  if (calls++ == 0) scale_thousands(reinterpret_cast<uint64_t>(&calls), {scale});\n") if scale else ""
    return (_SCAN if scale else "#include <cstdint>\n#include <cstring>\n") + r"""
void matmul_cpu(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
""" + patch + f"  for (int64_t rep = 0; rep < {reps}; ++rep) {{\n" + r"""#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * n;
      std::memset(row, 0, sizeof(float) * n);
      for (int64_t p = 0; p < k; ++p) {
        const float av = a[i * k + p];
        const float* brow = b + p * n;
        for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
      }
    }
  }
}
"""


#: The honest GEMM reporting a fifth of its time (about 0.2 ms a call at reduced size: under the allowance).
MATMUL_SCALED_MS = _gemm(0.2, 1)
#: The GEMM computed 300 times over (about 45-80 ms a call, a kernel slower than the harness's own work per call),
#: reporting a thousandth of its time.
MATMUL_SLOW_SCALED_MS = _gemm(0.001, 300)
#: The same slow GEMM, honest.
MATMUL_SLOW = _gemm(None, 300)


@pytest.mark.parametrize("kernel", [MATMUL_SCALED_MS, MATMUL_SLOW_SCALED_MS, MATMUL_SLOW],
                         ids=["scaled", "slow_scaled", "slow_honest"])
def test_nothing_static_stops_the_red_team_kernels(kernel: str) -> None:
    assert check_cpp_text(kernel, "kernels/k.cpp") == []


# ---------------------------------------------------------------------------- the rule
def test_a_baseline_batch_counts_its_warm_up_calls_at_its_median() -> None:
    # 10 samples of 1 ms and 2 warm-ups in a 40 ms batch: (40 - 10 - 2) / 12 a call
    assert U.baseline_overhead_ms(40.0, [1.0] * 10, 2) == pytest.approx(28.0 / 12)
    assert U.baseline_overhead_ms(5.0, [1.0] * 10, 0) == 0.0  # never below zero
    assert U.baseline_overhead_ms(5.0, [], 1) is None


def _round(u_c: float, reported: float, u_b: float, calls: int = 15) -> U.RoundWall:
    """A round whose calls each leave ``u_c`` ms unaccounted and whose eager batch leaves ``u_b`` a call."""
    return U.RoundWall(calls=[(u_c + reported, reported)] * calls,
                       baselines=[(u_b * 12 + 0.2 * 12, [0.2] * 11, 1)])


FLUSH = 32 << 20
HASH = 1e-6  # 1 ns a byte


def test_calls_leaving_what_the_baselines_path_leaves_pass() -> None:
    # the honest runs' worst rounds: u_c up to 2.4x u_b, or u_b plus 7 ms
    excess, _ = U.judge([_round(7.2, 0.25, 3.0)] * 9, 196608, FLUSH, HASH)
    assert excess < 0
    excess, _ = U.judge([_round(11.9, 0.26, 5.0)] * 9, 196608, FLUSH, HASH)
    assert excess < 0
    # a slow honest kernel (80 ms) leaves no more than a fast one
    excess, _ = U.judge([_round(7.0, 80.0, 3.3)] * 9, 196608, FLUSH, HASH)
    assert excess < 0
    # 128 MiB of inputs and outputs: the runner hashes and copies them every call (190 ms over the baselines' 9 ms)
    excess, _ = U.judge([_round(200.0, 105.0, 9.0)] * 9, 128 << 20, FLUSH, HASH)
    assert excess < 0


def test_calls_leaving_much_more_than_the_harness_explains_are_judged_over() -> None:
    excess, judged = U.judge([_round(47.0, 0.04, 2.6)] * 9, 196608, FLUSH, HASH)
    assert excess > 0 and all(e.excess > 0 for e in judged)


def test_one_slow_round_does_not_decide_and_thin_rounds_are_not_judged() -> None:
    rounds = [_round(47.0, 0.04, 2.6)] * 4 + [_round(4.0, 0.2, 3.0)] * 5
    assert U.judge(rounds, 196608, FLUSH, HASH)[0] < 0
    assert U.judge([_round(47.0, 0.04, 2.6, calls=2)] * 9, 196608, FLUSH, HASH) is None
    assert U.judge([U.RoundWall(calls=[(50.0, 0.04)] * 9)], 196608, FLUSH, HASH) is None  # no baseline batch


class _Sets:
    """The set store of a session whose sets hold 128 KiB of inputs and one 128x128 float32 output."""

    def indices(self) -> list[int]:
        return [0]

    def input_bytes(self) -> int:
        return 131072

    def __getitem__(self, k: int) -> SimpleNamespace:
        return SimpleNamespace(outputs=[SimpleNamespace(shape=[128, 128], dtype="float32")])


def _session(kind: str) -> SimpleNamespace:
    ctx = SimpleNamespace(kind=kind, protocol=SimpleNamespace(timer=SimpleNamespace(l2_flush_multiple=2.0)))
    return SimpleNamespace(ctx=ctx, sets=_Sets(), flags=[], violations=[])


def test_the_pass_is_refused_on_cpu_and_not_judged_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = [_round(47.0, 0.04, 2.6)] * 9
    sess = _session("cpu")
    assert U.io_bytes_of(sess) == 131072 + 128 * 128 * 4 and U.flush_bytes_of(sess) == FLUSH
    U.check(sess, rounds)
    assert sess.flags == ["unaccounted_wall"]
    assert [v.rule for v in sess.violations] == ["T8.runtime.timer_patched"]
    assert "9 of 9 rounds" in sess.violations[0].message
    sess = _session("cuda")
    assert U.check(sess, rounds) is None and not sess.violations and not sess.flags
    monkeypatch.setattr(U, "ENABLED", False)
    sess = _session("cpu")
    assert U.check(sess, rounds) is None and not sess.violations


# ---------------------------------------------------------------------------- end to end
@pytest.mark.slow
@pytest.mark.parametrize("enabled", [True, False], ids=["rule_on", "rule_off"])
def test_a_slow_gemm_reporting_a_thousandth_of_its_time_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool) -> None:
    monkeypatch.setattr(U, "ENABLED", enabled)
    row = _grade(tmp_path, STEM, MATMUL_SLOW_SCALED_MS, "standard_fast")
    if not enabled:  # what the rule stops: graded 'correct', reward 2 at 3.6x eager while 400x slower
        assert row["status"] == "correct" and row["reward"] >= 2.0, (row["status"], row["message"][:400])
        return
    assert row["status"] == "rejected" and row["rule"] == "T8.runtime.timer_patched", row["message"][:400]
    assert "unaccounted_wall" in row["flags"] and row["reward"] < 0


@pytest.mark.slow
def test_the_slow_honest_gemm_keeps_its_time(tmp_path: Path) -> None:
    row = _grade(tmp_path, STEM, MATMUL_SLOW, "standard_fast")
    assert row["status"] == "correct" and row["reward"] == 1.0, row["message"][:400]
    assert "unaccounted_wall" not in row["flags"]


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["19_ReLU", "23_Softmax", STEM, "12_Gemm_Multiply_LeakyReLU", "1_MLP"])
def test_the_honest_kernelbench_solutions_pass_the_rule(tmp_path: Path, stem: str) -> None:
    row = _grade(tmp_path, stem, None, "standard_fast")
    assert row["status"] == "correct" and "unaccounted_wall" not in row["flags"], row["message"][:400]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="open: a lie under the harness's own cost per call (0.2 ms hidden under "
                                       "3-12 ms) is not seen by the unaccounted-wall rule")
def test_a_fast_gemm_reporting_a_fifth_of_its_time_is_refused(tmp_path: Path) -> None:
    row = _grade(tmp_path, STEM, MATMUL_SCALED_MS, "standard_fast")
    # Graded 'correct', reward 2, speedup 3.2-4.2 (the honest GEMM reads 0.6-0.9).
    assert row["reward"] <= 1.0, (row["status"], row["reward"], row["speedup_eager"])
