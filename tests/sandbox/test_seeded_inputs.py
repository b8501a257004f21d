"""``input_transport: seeded``: the runner makes input sets from their seeds before the candidate exists.

Every set the runner makes must match the trusted fingerprints or be handed over; the task's code that made
them must be gone before the candidate's code runs (T3/T6); grading and profiling make their timing sets up front.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.sandbox.conftest import RELU_TASK, task_of

# get_inputs that no second process can reproduce: the set's values depend on the process id.
UNREPRODUCIBLE_TASK = RELU_TASK.replace(
    "return [torch.randn(batch_size, dim)]",
    "import os\n    return [torch.randn(batch_size, dim) + os.getpid()]",
)

# A candidate that looks for the reference model (or the task's get_inputs) anywhere in its process.
SNOOPING_MODEL_NEW = """
import gc
import torch
import cuda_extension


def _leftovers():
    found = []
    for obj in gc.get_objects():
        try:
            if isinstance(obj, type) and obj.__name__ == "Model" and issubclass(obj, torch.nn.Module):
                found.append(f"class {obj.__module__}.Model")
            elif callable(obj) and getattr(obj, "__name__", "") == "get_inputs" and not str(
                getattr(obj, "__module__", "")
            ).startswith("torch"):
                found.append(f"function {getattr(obj, '__module__', '?')}.get_inputs")
        except Exception:
            pass
    return found


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        found = _leftovers()
        if found:
            raise RuntimeError("reference code reachable from the candidate: " + ", ".join(found))

    def forward(self, x):
        out = torch.empty_like(x)
        cuda_extension.relu_forward(x, out)
        return out
"""


def _evaluate(make_evaluator, phase: str, transport: str, task, ws, kit):
    """``phase`` ('verify', 'profile', 'grade') of the workspace with ``input_transport: transport``; must pass."""
    with make_evaluator(input_transport=transport) as ev:
        result = getattr(ev, phase)(task, ws, kit)
    assert result.status.value == "correct", result.summary_for_agent()
    return result


@pytest.mark.slow
def test_seeded_sets_are_made_by_the_runner_and_match(make_evaluator, make_ws, kit, tasks, honest_relu):
    result = _evaluate(make_evaluator, "profile", "seeded", tasks.relu, make_ws(honest_relu), kit)
    # 3 verify sets + 2 timing sets, all made in the runner: nothing handed over.
    assert result.diagnostics.input_sets.model_dump() == {"seeded": 5, "staged": 0}


@pytest.mark.slow
def test_staged_transport_hands_every_set_over(make_evaluator, make_ws, kit, tasks, honest_relu):
    result = _evaluate(make_evaluator, "verify", "staged", tasks.relu, make_ws(honest_relu), kit)
    assert result.diagnostics.input_sets.model_dump() == {"seeded": 0, "staged": 3}


@pytest.mark.slow
def test_sets_the_runner_cannot_reproduce_are_handed_over(make_evaluator, make_ws, kit, honest_relu):
    task = task_of("relu_pid", UNREPRODUCIBLE_TASK)
    # The runner's copies differ from the trusted ones (other pid): every set comes from the trusted side,
    # and the honest kernel is judged on those.
    result = _evaluate(make_evaluator, "verify", "seeded", task, make_ws(honest_relu, UNREPRODUCIBLE_TASK), kit)
    assert result.diagnostics.input_sets.model_dump() == {"seeded": 0, "staged": 3}


@pytest.mark.slow
def test_reference_code_is_gone_before_the_candidate_loads(make_evaluator, make_ws, kit, tasks):
    result = _evaluate(make_evaluator, "verify", "seeded", tasks.relu, make_ws(textwrap.dedent(SNOOPING_MODEL_NEW)), kit)
    assert result.diagnostics.input_sets.seeded == 3


@pytest.mark.slow
def test_grading_makes_its_timing_sets_up_front(make_evaluator, make_ws, kit, tasks, honest_relu):
    result = _evaluate(make_evaluator, "grade", "seeded", tasks.relu, make_ws(honest_relu), kit)
    assert result.diagnostics.input_sets.model_dump() == {"seeded": 5, "staged": 0}
    assert "extra_sets" not in result.diagnostics.phase_s  # nothing made after the candidate loaded
