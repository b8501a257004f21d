"""The scripted policy of the ``ncu`` ablation (examples/ncu-guided): its next edit depends on the named field
``occupancy achieved`` of the ncu tool's report, and without a report (the ablated arm) it keeps its first kernel."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from cuda_agent.harness.ncu_profile import parse_ncu_csv, summarize
from cuda_agent.schemas.messages import Message
from cuda_agent.toolcalls import parse_tool_calls

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
from test_ncu import HEADER, UNITS, ROWS, _csv  # noqa: E402


@pytest.fixture(scope="module")
def guided():
    spec = importlib.util.spec_from_file_location("ncu_guided", REPO / "examples" / "ncu-guided" / "ncu_guided.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ncu_guided"] = module  # as `-p ncu_guided` imports it (pydantic resolves its annotations there)
    spec.loader.exec_module(module)
    return module


def _report(occupancy: str) -> str:
    row = list(ROWS[0])
    row[HEADER.index("sm__warps_active.avg.pct_of_peak_sustained_active")] = occupancy
    return summarize(parse_ncu_csv(_csv([HEADER, UNITS, row])), 400)


def _calls(out) -> list[str]:
    return [c.name for c in parse_tool_calls(out.text, 1)[0]]


def test_the_decision_reads_the_named_field(guided):
    assert guided.decide(_report("3.1")) == "restore_grid"
    assert guided.decide(_report("86.2")) == "keep"
    assert guided.decide("error: unknown tool 'ncu'; valid tools: ...") == "keep"


@pytest.mark.parametrize(("ncu_says", "decision"), [("low", "restore_grid"), ("absent", "keep")])
def test_an_episode_edits_after_ncu_only_when_it_says_so(guided, ncu_says, decision):
    policy = guided.NcuGuidedPolicy()
    task = (REPO / "examples" / "tasks" / "swish.py").read_text()
    assert _calls(policy.query([Message(role="user", content="task")], [])) == ["read_file"]
    second = policy.query([Message(role="tool", content=task)], [])
    assert policy.task == "swish" and "blocks = 1;  // first attempt: one block" in second.text
    assert _calls(second)[-2:] == ["compile", "verify"]
    assert _calls(policy.query([Message(role="tool", content="outputs match")], [])) == ["ncu"]
    seen = _report("3.1") if ncu_says == "low" else "unknown tool 'ncu'"
    fourth = policy.query([Message(role="tool", content=seen)], [])
    assert policy.decision == decision
    if decision == "restore_grid":
        assert "blocks = 1;" not in fourth.text and "132 * 32" in fourth.text and _calls(fourth)[-1] == "verify"
    else:
        assert _calls(fourth) == []
    assert _calls(policy.query([Message(role="tool", content="")], [])) == ["profile"]
    assert _calls(policy.query([Message(role="tool", content="")], [])) == ["finish"]
