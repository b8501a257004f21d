"""Honest ``model_new.py`` idioms the allowlist refused until session 42 (found by the Triton corpus,
``examples/triton-backend/tests/test_honest_corpus_s42.py``; the allowlist is every backend's), each beside the cheat
that shows the fix opened no hole:

- a ``@staticmethod`` of ModelNew with a number parameter (``block: int``) called as ``self.launch(x, 256)``: its
  arguments were matched one place off (the first taken for ``self``), so a tensor was checked against the number
  parameter and the number against the tensor's;
- the same method called through its class, ``ModelNew.launch(x)``: a call on an unknown object;
- a static method's parameter annotated ``int`` was a tensor in its body, so size arithmetic on it was refused;
- ``math.pi`` / ``math.e`` were read as math functions, so ``math.sqrt(2.0 / math.pi)`` looked like compute.

Still refused, on purpose: a forward input annotated ``float`` handed to a helper's ``s: float`` (an annotation on
an input is the candidate's word; the harness passes what ``get_inputs()`` makes, and arithmetic on a tensor in
that helper would be PyTorch compute).
"""

from __future__ import annotations

import pytest

from cuda_agent.harness.integrity import check_model_new_source

HEAD = "import math\nimport torch\nimport torch.nn as nn\nimport cuda_extension as ext\n\n\n"


def _model(forward: str, extra: str = "") -> str:
    return HEAD + "class ModelNew(nn.Module):\n" + extra + "    def forward(self, x):\n" + forward


LAUNCH = ("    @staticmethod\n    def launch(x: torch.Tensor, block: int = 256) -> torch.Tensor:\n"
          "        rows, cols = x.shape\n        block = min(block, cols * 2)\n"
          "        return ext.softmax(x, rows, cols, block)\n\n")

HONEST = {
    "static_method_with_number_parameter": _model("        return self.launch(x, 128)\n", LAUNCH),
    "static_method_number_by_keyword": _model("        return self.launch(x, block=128)\n", LAUNCH),
    "static_method_called_on_the_class": _model("        return ModelNew.launch(x)\n", LAUNCH),
    "static_method_class_call_with_number": _model("        return ModelNew.launch(x, 64)\n", LAUNCH),
    "math_constants_in_forward": _model("        c = math.sqrt(2.0 / math.pi) * math.e\n"
                                        "        return ext.gelu(x, c)\n"),
    "math_pi_imported": ("from math import pi\n" + _model("        return ext.gelu(x, 2.0 / pi)\n")),
}

CHEATS = {
    # a tensor where the static method takes a number: `block` then computes on it with PyTorch
    "tensor_to_static_number_parameter": (_model("        return self.launch(x, x)\n", LAUNCH), "T1.python.operator"),
    "tensor_to_static_number_by_class": (_model("        return ModelNew.launch(x, x)\n", LAUNCH),
                                         "T1.python.operator"),
    "tensor_to_static_number_by_keyword": (_model("        return ModelNew.launch(x, block=x)\n", LAUNCH),
                                           "T1.python.operator"),
    # the static method handed over as a value: its number parameters would receive whatever map gives them
    "static_method_as_a_value": (_model("        return list(map(ModelNew.launch, [x], [x]))[0]\n", LAUNCH),
                                 "T1.python.submodule_call"),
    # math constants are numbers; math functions on tensors are still compute
    "math_function_on_a_tensor": (_model("        return ext.gelu(x, math.pi) * math.exp(x)\n"), "T1.python.operator"),
    # another class's static method stays an unknown call
    "other_class_static_method": (HEAD + "class Helper:\n    @staticmethod\n    def go(x):\n        return x.relu()\n\n\n"
                                  + _model("        return ext.id(Helper.go(x))\n"), None),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_static_method_and_math_constant_idioms_pass(name: str) -> None:
    violations = check_model_new_source(HONEST[name], "model_new.py")
    assert violations == [], "\n".join(str(v) for v in violations)


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_the_cheats_beside_them_are_refused(name: str) -> None:
    source, rule = CHEATS[name]
    rules = [v.rule for v in check_model_new_source(source, "model_new.py")]
    assert rules, f"{name} passed the allowlist"
    if rule is not None:
        assert rule in rules, (name, rules)
