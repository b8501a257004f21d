"""The static rules of Triton files: honest solutions pass, a fixture of every applicable THREATS.md class fails
with the rule of that class, and the rewrite keeps line numbers."""

from __future__ import annotations

import pytest
from triton_cheats import CAUGHT_BY_RULE_OF, GRADING, HONEST, NOT_APPLICABLE, RUNTIME, STATIC
from triton_support import EXAMPLE_TASKS, honest

from cuda_agent.harness.integrity import RULES, threat_class
from triton_backend.integrity import check_triton_source, kernel_names


@pytest.mark.parametrize("name", EXAMPLE_TASKS)
def test_honest_solutions_pass(name):
    found = check_triton_source(honest(name)["model_new.py"])
    assert found.violations == [] and found.kernels == [f"{name}_kernel"]


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_cheats_are_rejected_with_their_rule(name):
    threat, source, rule = STATIC[name]
    rules = [v.rule for v in check_triton_source(source).violations]
    assert rule in rules, (name, rules)
    assert rule in RULES and threat_class(rule) in {threat, CAUGHT_BY_RULE_OF.get(threat)}


def test_every_threat_class_has_a_fixture_or_a_reason():
    covered = {t for table in (STATIC, RUNTIME, GRADING) for t, _, _ in table.values()}
    assert covered | set(NOT_APPLICABLE) == set(range(1, 24)), sorted(set(range(1, 24)) - covered - set(NOT_APPLICABLE))


def test_runtime_and_grading_fixtures_pass_the_static_rules():
    for name, (_, source, _) in {**RUNTIME, **GRADING}.items():
        assert check_triton_source(source).violations == [], name


def test_common_triton_idioms_are_accepted():
    autotuned = HONEST.replace("@triton.jit\n", "@triton.autotune(configs=[triton.Config({'BLOCK': 1024}, num_warps=4)],"
                               " key=['n'])\n@triton.jit\n").replace(
        "swish_kernel[grid](x, out, n, BLOCK=1024)", "swish_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](x, out, n)")
    helper = HONEST.replace("        out = torch.empty_like(x)\n", "        return swish(x)\n", 1) + (
        "\n\ndef swish(x):\n    out = torch.empty_like(x)\n    n = x.numel()\n"
        "    swish_kernel[(triton.cdiv(n, 1024),)](\n        x, out,\n        n, BLOCK=1024,\n    )\n    return out\n")
    for source in (autotuned, helper):
        assert check_triton_source(source).violations == []


def test_a_violation_names_the_line_of_the_original_file():
    source = HONEST.replace("        return out\n", "        return x * torch.sigmoid(x)\n")
    [first, *_] = check_triton_source(source).violations
    assert source.splitlines()[first.line - 1].strip() == "return x * torch.sigmoid(x)"


def test_kernel_names():
    assert kernel_names(HONEST) == ["swish_kernel"] and kernel_names("def (") == []


@pytest.mark.parametrize("name", EXAMPLE_TASKS)
def test_scripted_trajectories_write_the_honest_solutions(name):
    import yaml

    from triton_support import PACKAGE

    actions = yaml.safe_load((PACKAGE / "trajectories" / f"{name}.yaml").read_text())["actions"]
    writes = [c["arguments"] for a in actions for c in a["tool_calls"] if c["name"] == "write_file"]
    assert writes == [{"path": "model_new.py", "content": honest(name)["model_new.py"]}]
    order = [c["name"] for a in actions for c in a["tool_calls"]]
    assert order == ["read_file", "write_file", "compile", "verify", "profile", "finish"]
