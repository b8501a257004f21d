"""``benchmarks/sft_first_turn.py``'s offline check of a first reply: real tool-call parsing, the family writer's
clean solution and real nvcc."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from sft_first_turn import check_reply  # noqa: E402


def _reply(source: str) -> str:
    call = {"name": "write_file", "arguments": {"path": "kernels/chain.cu", "content": source}}
    return f"Writing one fused kernel.\n<tool_call>{json.dumps(call)}</tool_call>"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc compiles the reply's kernel")
def test_the_clean_kernel_is_ok_and_a_wrong_operator_or_a_syntax_slip_is_not() -> None:
    from cuda_agent.training.kernel_family.writer import Style, write_solution

    chain = ["erf", "cos", "cos"]
    clean = write_solution(chain, "cuda", Style()).files["kernels/chain.cu"]
    ok = check_reply(_reply(clean), chain, eos=True, tokens=800)
    assert ok == {"eos": True, "tokens": 800, "parsed": True, "compiles": True, "ops_equal": True,
                  "first_turn_ok": True}
    wrong_op = clean.replace("cosf(v)", "erff(v)", 1)  # an operator name copied wrong, as PPO step 2's rollouts did
    assert wrong_op != clean
    row = check_reply(_reply(wrong_op), chain, eos=True, tokens=800)
    assert row["compiles"] and not row["ops_equal"] and not row["first_turn_ok"]
    slip = clean.replace("  return v;", "  return v)\\", 1)  # a syntax slip: parses, does not compile
    row = check_reply(_reply(slip), chain, eos=True, tokens=800)
    assert row["parsed"] and not row["compiles"] and not row["first_turn_ok"]
    assert check_reply("no tool call here", chain, eos=False, tokens=5)["parsed"] is False
