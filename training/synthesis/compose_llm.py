"""LLM composer: asks any policy plugin to fuse sampled operators into one task module.

The prompt is the jinja2 template ``templates/compose.j2`` (``StrictUndefined``:
a missing variable fails). The response's first ```python block (or the whole
text) must parse and define ``Model``, ``get_inputs`` and ``get_init_inputs``;
anything else raises :class:`ComposeError`, recorded as a dropped candidate.
Execution checks are left to the filters, as for the rule-based composer.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from cuda_agent.schemas.messages import Message
from cuda_agent.training.synthesis.compose_rules import ComposedTask, ComposeSettings
from cuda_agent.training.synthesis.operators import OperatorSpec

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class ComposeError(ValueError):
    """The model's answer is not a valid task module; the message says what is missing."""


def default_template() -> str:
    """Text of the packaged ``compose.j2``."""
    return (Path(__file__).parent / "templates" / "compose.j2").read_text()


def render_prompt(ops: Sequence[OperatorSpec], template: str | None = None, **extra: Any) -> str:
    """The compose prompt for ``ops``; ``extra`` fills min_ms, max_ms, device."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    values = {"min_ms": 1, "max_ms": 100, "device": "the GPU", **extra}
    requires = sorted({r for op in ops for r in op.requires})
    return env.from_string(template or default_template()).render(ops=list(ops), requires=requires, **values)


def parse_task_module(text: str) -> str:
    """The task module in a model answer; raises :class:`ComposeError` when invalid."""
    m = _FENCE.search(text)
    code = (m.group(1) if m else text).strip() + "\n"
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ComposeError(f"answer is not valid Python: line {exc.lineno}: {exc.msg}") from exc
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise ComposeError(f"answer does not define {', '.join(missing)} (a KernelBench task needs {', '.join(REQUIRED_NAMES)})")
    return code


class LLMComposer:
    """Samples operators per candidate (deterministic given seed and index) and asks ``policy`` to compose them."""

    name = "llm"

    def __init__(self, catalog: Sequence[OperatorSpec], policy: Any, settings: ComposeSettings | None = None,
                 seed: int = 0, template: str | None = None, prompt_values: dict[str, Any] | None = None,
                 policy_name: str = "") -> None:
        self.settings = settings or ComposeSettings()
        s = self.settings
        self.ops = [op for op in sorted(catalog, key=lambda o: o.name)
                    if (s.include_stochastic or not op.stochastic) and (s.include_transformers or not op.requires)]
        self.policy, self.seed, self.template = policy, seed, template
        self.prompt_values = prompt_values or {}
        self.policy_name = policy_name

    def sample_ops(self, index: int) -> list[OperatorSpec]:
        """The operators requested for candidate ``index``."""
        rng = random.Random(f"llm:{self.seed}:{index}")
        lengths = list(range(self.settings.min_ops, self.settings.max_ops + 1))
        n = rng.choices(lengths, [self.settings.op_count_weights.get(k, 1.0) for k in lengths])[0]
        return rng.sample(self.ops, min(n, len(self.ops)))

    def compose(self, index: int) -> ComposedTask:
        """Candidate ``index``; raises :class:`ComposeError` on an invalid answer."""
        ops = self.sample_ops(index)
        prompt = render_prompt(ops, self.template, **self.prompt_values)
        if hasattr(self.policy, "reset"):
            self.policy.reset()
        out = self.policy.query([Message(role="user", content=prompt)], [])
        code = parse_task_module(out.text)
        return ComposedTask(
            id=f"synth/s{self.seed}-{index:05d}", code=code, ops=[op.name for op in ops], shapes={}, dtypes=[],
            stochastic=any(op.stochastic for op in ops), requires=sorted({r for op in ops for r in op.requires}),
            provenance={"seed": self.seed, "index": index, "composer": self.name, "policy": self.policy_name},
        )

