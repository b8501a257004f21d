"""The model_new.py allowlist: every cheat in the corpus is rejected by its rule, every honest variant passes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_agent.harness.integrity import RULES, check_model_new_source


def test_cheat_is_rejected_by_its_rule(python_cheat: Path, expectations: Callable[[Path], str]) -> None:
    rule = expectations(python_cheat)
    assert rule in RULES, f"{python_cheat.name} expects unknown rule {rule}"
    violations = check_model_new_source(python_cheat.read_text(), "model_new.py")
    assert rule in [v.rule for v in violations], f"{python_cheat.name}: expected {rule}, got {violations}"
    hit = next(v for v in violations if v.rule == rule)
    assert hit.file == "model_new.py"
    assert str(hit).startswith(f"[{rule}] model_new.py")


def test_honest_variant_is_accepted(python_honest: Path) -> None:
    violations = check_model_new_source(python_honest.read_text(), "model_new.py")
    assert violations == [], "\n".join(str(v) for v in violations)


def test_message_names_rule_line_and_code() -> None:
    src = "import torch\nimport cuda_extension\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
          "        y = cuda_extension.f(x)\n        return y.sum()\n"
    (v,) = check_model_new_source(src)
    assert v.rule == "T1.python.tensor_method"
    assert v.line == 8
    assert "y.sum" in v.message and "allowed methods" in v.message
    assert str(v).startswith("[T1.python.tensor_method] model_new.py:8: ")


def test_syntax_error_and_missing_class_are_reported() -> None:
    (v,) = check_model_new_source("def broken(:\n")
    assert v.rule == "T1.python.no_model_new" and v.line == 1
    (w,) = check_model_new_source("import torch\n")
    assert w.rule == "T1.python.no_model_new" and "ModelNew" in w.message


def test_shape_arithmetic_passes_but_the_same_on_tensors_fails() -> None:
    head = "import torch\nimport cuda_extension\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    ok = head + "        n = x.size(0) * x.size(1) + 255\n        return cuda_extension.f(x, n // 256)\n"
    bad = head + "        n = x * x.size(1) + 255\n        return cuda_extension.f(x, n // 256)\n"
    assert check_model_new_source(ok) == []
    violations = check_model_new_source(bad)
    assert {v.rule for v in violations} == {"T1.python.operator"} and violations[0].line == 7


def test_torch_in_init_is_allowed_but_flags_are_not() -> None:
    src = ("import torch\nimport torch.nn as nn\nimport cuda_extension\n\n\nclass ModelNew(nn.Module):\n"
           "    def __init__(self, n):\n        super().__init__()\n"
           "        w = torch.randn(n, n) @ torch.randn(n, n)\n        self.w = nn.Parameter(w.relu())\n"
           "        torch.backends.cuda.matmul.allow_tf32 = True\n\n"
           "    def forward(self, x):\n        return cuda_extension.f(x, self.w)\n")
    assert [(v.rule, v.line) for v in check_model_new_source(src)] == [("T16.python.global_flag", 11)]


def test_branch_without_torch_code_is_not_a_fallback() -> None:
    src = ("import torch\nimport cuda_extension\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
           "        if x.numel() > 1024:\n            return cuda_extension.f(x)\n        return x\n")
    assert check_model_new_source(src) == []  # an early return of an input is not torch compute


@pytest.mark.parametrize("name", ["cuda_extension", "my_ext"])
def test_extension_name_is_configurable(name: str) -> None:
    src = f"import torch\nimport {name}\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
          f"        return {name}.f(x)\n"
    assert check_model_new_source(src, extension_names=(name,)) == []


def test_the_workspace_starter_is_no_integrity_violation_but_fails_when_called() -> None:
    """The starter model_new.py of every example task (forward only raises NotImplementedError) passes the static
    rules: an episode that never wrote its ModelNew is a failure, not an attempted hack. Anything more than that lone
    raise is judged as before."""
    import inspect

    from cuda_agent.harness.layout import starter_model_new

    root = Path(__file__).resolve().parents[2] / "examples" / "tasks"
    for task in sorted(root.glob("*.py")):
        for kind in ("cuda", "cpu"):
            source = starter_model_new(task.read_text(), kind)
            assert check_model_new_source(source) == [], (task.name, kind)
            namespace: dict = {}
            exec(compile(source.replace("import cuda_extension", ""), "model_new.py", "exec"), namespace)
            forward = namespace["ModelNew"].forward
            params = [p for p in inspect.signature(forward).parameters.values() if p.default is inspect.Parameter.empty]
            with pytest.raises(NotImplementedError, match="not written yet"):
                forward(*([None] * len(params)))
    head = "import torch\nimport torch.nn as nn\nimport cuda_extension\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    for body in ("        y = torch.relu(x)\n        raise NotImplementedError('later')\n",  # compute, then raise
                 "        raise NotImplementedError(torch.relu(x))\n",  # compute inside the raise
                 "        raise RuntimeError('not yet')\n",  # another exception: judged as before
                 "        return torch.empty_like(x)\n"):
        rules = {v.rule for v in check_model_new_source(head + body)}
        assert rules & {"T1.python.extension_unused", "T1.python.torch_call", "T1.python.operator"}, body


@pytest.mark.parametrize("body", [
    "for y in map(self.act, [x]):\n            return y\n        return x",
    "return next(iter(map(self.act, [x])))",
    "return list(filter(self.act, [x]))[0]",
    "return max([x], key=self.act)",
    "return sorted([x], key=self.helper)[0]",
])
def test_a_module_or_function_handed_to_a_builtin_is_a_call_of_it(body: str) -> None:
    """Session 36's red team: ``map(self.act, xs)`` ran ``nn.SiLU`` in forward past the call rules."""
    source = ("import torch\nimport torch.nn as nn\nimport cuda_extension\n\n\nclass ModelNew(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n        self.act = nn.SiLU()\n\n"
              "    def helper(self, t):\n        return t\n\n"
              f"    def forward(self, x):\n        cuda_extension.f(x)\n        {body}\n")
    rules = {v.rule for v in check_model_new_source(source, "model_new.py", extension_names=("cuda_extension",))}
    assert rules & {"T1.python.submodule_call", "T1.python.builtin_call"}, rules


@pytest.mark.parametrize(("snippet", "rule"), [
    ("class Knob(object):\n    def __init__(self):\n        self.v = 1.0\n\n    def __float__(self):\n        return self.v\n",
     "T7.python.module_override"),
    ("class Knob(object):\n    def __index__(self):\n        return 1\n", "T7.python.module_override"),
    ("def helper(t):\n    return t.numpy()\n", "T1.python.tensor_method"),
    ("def helper(t):\n    return t.tolist()\n", "T1.python.tensor_method"),
])
def test_implicit_dunders_and_leaving_torch_for_numpy_are_refused(snippet: str, rule: str) -> None:
    """Session 36's red team: a helper's ``__float__`` ran NumPy compute when pybind11 converted it to a double."""
    source = ("import torch\nimport torch.nn as nn\nimport cuda_extension\n\n\n" + snippet +
              "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
              "    def forward(self, x):\n        out = torch.empty_like(x)\n        cuda_extension.f(x, out)\n"
              "        return out\n")
    rules = {v.rule for v in check_model_new_source(source, "model_new.py", extension_names=("cuda_extension",))}
    assert rule in rules, rules
