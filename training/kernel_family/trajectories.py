"""Expert episodes of the family in the agent loop's exact format: messages, tool calls, token layout.

An :class:`ExpertPlan` fixes what the expert does on one task: the style of its first kernel, a bug
planted in it (repaired after the compiler or verify reports it), and whether it rewrites a slow kernel
fused after profiling. :func:`expert_turns` turns a plan into turns: the assistant's text with
``<tool_call>{json}</tool_call>`` blocks (the text protocol the loop parses), the tool calls, and the
observations. Observations are rendered by the harness's own code (``CandidateResult.summary_for_agent``,
``parse_errors`` on compiler output in gcc's or nvcc's format, ``compare_output`` on the actual wrong and
right outputs, the file tools' messages, the loop's truncation), with timings from a simple cost model.
:func:`episode_tokens` tokenizes the turns exactly as :class:`~cuda_agent.training.rollout.token_policy.
EngineTokenPolicy` records a real episode (``TokenizedConversation``: observation tokens get mask 0).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import torch

from cuda_agent.schemas.messages import Message, ToolSchema
from cuda_agent.schemas.result import Baselines, CandidateResult, CheckError, Status, Timing
from cuda_agent.training.kernel_family.ops import OPS, chain_apply
from cuda_agent.training.kernel_family.tasks import FamilyTask
from cuda_agent.training.kernel_family.writer import LAUNCHES, Backend, Bug, Solution, Style, write_solution

#: Tools the family's episodes offer (and the expert uses), in offering order.
TOOLS = ["write_file", "edit_file", "compile", "verify", "profile", "finish"]
#: Observation characters shown (``agent.observation_limit`` of the family's configs).
OBSERVATION_LIMIT = 700

SYSTEM_TEMPLATE = (
    "You write fast custom {{ 'CUDA' if kernel_suffix == '.cu' else 'C++/OpenMP' }} kernels that replace a PyTorch "
    "model, working only inside your workspace.\n"
    "Call tools as <tool_call>{\"name\": \"TOOL_NAME\", \"arguments\": {...}}</tool_call>. Tools: "
    "{{ tools | map(attribute='name') | join(', ') }}.\n"
    "When your solution is complete, call `finish`.\n"
)


@dataclass
class QualityMix:
    """How often the expert writes each style and plants each bug (probabilities)."""

    fused: float = 0.5
    vector: float = 0.35
    launch: dict[str, float] = field(default_factory=lambda: {"t256": 0.35, "t512": 0.15, "t128": 0.15, "narrow": 0.35})
    bug: dict[str, float] = field(default_factory=lambda: {"none": 0.55, "semicolon": 0.15, "undeclared": 0.1,
                                                            "wrong_op": 0.2})
    improve: float = 0.2  # share of slow first kernels rewritten fused after profiling
    verify_early: float = 0.0  # share of episodes whose first turn verifies right after compiling (one reply)


@dataclass
class ExpertPlan:
    """What the expert does on one task."""

    task: FamilyTask
    backend: Backend
    style: Style
    bug: Bug | None = None
    improve_to: Style | None = None
    verify_early: bool = False

    @property
    def label(self) -> str:
        """Style label plus bug and improvement, e.g. ``unfused-scalar-t256+semicolon->fused-vec-t256``."""
        s = self.style.label + (f"+{self.bug.kind}" if self.bug else "")
        return s + (f"->{self.improve_to.label}" if self.improve_to else "")


@dataclass
class Turn:
    """One assistant turn: its text (tool-call blocks included), calls and the observations they produce."""

    text: str
    calls: list[tuple[str, dict[str, Any]]]
    observations: list[str]


def draw_plan(task: FamilyTask, backend: Backend, rng: random.Random, mix: QualityMix | None = None) -> ExpertPlan:
    """A plan for ``task`` drawn with ``rng`` from ``mix``."""
    mix = mix or QualityMix()
    launch = rng.choices(list(mix.launch), weights=list(mix.launch.values()))[0]
    style = Style(fused=rng.random() < mix.fused, vector=rng.random() < mix.vector, launch=launch)
    kind = rng.choices(list(mix.bug), weights=list(mix.bug.values()))[0]
    bug = None
    if kind != "none":
        unique = [i for i, k in enumerate(task.chain) if task.chain.count(k) == 1]
        others = [k for k in OPS if k not in task.chain]
        if unique:
            i = rng.choice(unique)
            wrong = rng.choice([k for k in others if _differs(task, i, k)] or [""]) if kind == "wrong_op" else ""
            if kind != "wrong_op" or wrong:
                bug = Bug(kind=kind, op_index=i, wrong_op=wrong)  # type: ignore[arg-type]
    slow = not style.fused or style.launch == "narrow"
    improve = Style(fused=True, vector=style.vector, launch="t256") if slow and rng.random() < mix.improve else None
    return ExpertPlan(task=task, backend=backend, style=style, bug=bug, improve_to=improve,
                      verify_early=rng.random() < mix.verify_early)


def _differs(task: FamilyTask, index: int, wrong: str) -> bool:
    """Replacing operator ``index`` by ``wrong`` changes the output beyond tolerance (so verify catches it)."""
    chain = list(task.chain)
    bad = chain[:index] + [wrong] + chain[index + 1:]
    if OPS[wrong].spec.domain != "real" and index > 0:
        return False  # keep wrong ops within their domain: the mistake should be a wrong formula, not NaN
    from cuda_agent.training.kernel_family.tasks import sample_input

    x = sample_input(task.plan, n=256, seed=7)
    with torch.no_grad():
        a, b = chain_apply(chain, x), chain_apply(bad, x)
    return bool(torch.isfinite(b).all()) and not bool(torch.allclose(a, b, atol=0.05, rtol=0.05))


def _block(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "</tool_call>"


def _turn(text: str, calls: list[tuple[str, dict[str, Any]]], observations: list[str]) -> Turn:
    body = "\n".join([text] + [_block(n, a) for n, a in calls])
    return Turn(text=body, calls=calls, observations=observations)


# ------------------------------------------------------------------ observations (the harness's own renderers)
def _wrote(path: str, content: str) -> str:
    return f"wrote {path} ({len(content.splitlines())} lines, {len(content)} chars)"


def _compiled(task_id: str, steps: int, backend: Backend, rng: random.Random) -> str:
    secs = rng.uniform(1.5, 4.0) * steps if backend == "cuda" else rng.uniform(2.0, 6.0) * steps
    msg = f"compiled: {steps} translation unit(s) rebuilt in {secs:.2f} s" + (" for sm_90a" if backend == "cuda" else "")
    return CandidateResult(task_id=task_id, phase="compile", status=Status.correct, message=msg).summary_for_agent()


def compiler_log(sol: Solution) -> str:
    """The compiler output (gcc or nvcc format, as the harness trims it) for a solution's planted compile bug."""
    from cuda_agent.harness.build import trim_log

    assert sol.bug is not None and sol.bug.phase == "compile"
    text = sol.files[sol.kernel_path]
    lines = text.splitlines()
    bad = sol.bad_line.rstrip("\n")
    n = lines.index(bad) + 1  # 1-based line of the planted bug
    path = sol.kernel_path
    if sol.backend == "cuda":
        if sol.bug.kind == "semicolon":  # nvcc reports the statement after the missing ';'
            nxt = lines[n]
            out = [f'{path}({n + 1}): error: expected a ";"', nxt, " " * (len(nxt) - len(nxt.lstrip())) + "^"]
        else:
            col = bad.index("val")
            out = [f'{path}({n}): error: identifier "val" is undefined', bad, " " * col + "^"]
        out += ["", f'1 error detected in the compilation of "{path}".']
    else:
        if sol.bug.kind == "semicolon":
            nxt = lines[n]
            token = nxt.strip()[0]
            col = len(bad) + 1
            pad = " " * (len(bad))
            out = [f"{path}:{n}:{col}: error: expected \u2018;\u2019 before \u2018{token}\u2019", f"{n:>5} | {bad}",
                   f"      | {pad}^", f"      | {pad};", f"{n + 1:>5} | {nxt}",
                   "      | " + " " * (len(nxt) - len(nxt.lstrip())) + "~"]
        else:
            col = bad.index("val") + 1
            out = [f"{path}:{n}:{col}: error: \u2018val\u2019 was not declared in this scope", f"{n:>5} | {bad}",
                   "      | " + " " * (col - 1) + "^~~"]
    return trim_log("\n".join(out))


def _compile_failed(task_id: str, sol: Solution) -> str:
    from cuda_agent.harness.build import parse_errors

    log = compiler_log(sol)
    errors = [CheckError(check="compile", message=(f"{e.file}:{e.line}: " if e.file and e.line else "") + e.message,
                         details={"file": e.file, "line": e.line}) for e in parse_errors(log)[:20]]
    return CandidateResult(task_id=task_id, phase="compile", status=Status.compile_error,
                           message="compilation failed:\n" + log, errors=errors).summary_for_agent()


def _verify_failed(plan: ExpertPlan, sol: Solution, rng: random.Random, phase: str = "verify") -> str:
    """verify's mismatch report, from ``compare_output`` on the right and the wrong chain's actual outputs."""
    from cuda_agent.harness.compare import compare_output

    assert sol.bug is not None
    task = plan.task
    wrong = list(task.chain)
    wrong[sol.bug.op_index] = sol.bug.wrong_op
    shape = task.plan.cpu_input_shape
    errors: list[CheckError] = []
    for s in range(5):
        from cuda_agent.training.kernel_family.tasks import sample_input

        numel = 1
        for d in shape:
            numel *= d
        x = sample_input(task.plan, n=numel, seed=rng.randrange(1 << 30)).reshape(shape)
        with torch.no_grad():
            errors += compare_output(chain_apply(task.chain, x), chain_apply(wrong, x), atol=1e-2, rtol=1e-2, input_set=s)
    sets = sorted({e.input_set for e in errors if e.input_set is not None})
    msg = f"outputs differ from the reference on input set(s) {sets}: " + errors[0].message
    return CandidateResult(task_id=task.id, phase=phase, status=Status.incorrect, message=msg,  # type: ignore[arg-type]
                           errors=errors).summary_for_agent()


def _verified(task_id: str) -> str:
    return CandidateResult(task_id=task_id, phase="verify", status=Status.correct,
                           message="outputs match the reference on 5 input sets").summary_for_agent()


def kernel_time_ms(task: FamilyTask, backend: Backend, style: Style | None, n_ops: int) -> float:
    """Cost model of one forward: ``style`` None = eager PyTorch (one pass per operator)."""
    shape = task.plan.input_shape if backend == "cuda" else task.plan.cpu_input_shape
    numel = 1
    for d in shape:
        numel *= d
    if backend == "cuda":
        one_pass = 8.0 * numel / 3.0e12 * 1e3 + 0.004
        if style is None:
            return n_ops * one_pass
        t = one_pass * (1 if style.fused else n_ops) * (0.97 if style.vector else 1.0)
        return t * (9.0 if style.launch == "narrow" else 1.0)
    one_pass = numel * 2.0e-6 / 1e3 + 0.006
    if style is None:
        return n_ops * one_pass
    t = (numel * (0.8e-6 if style.vector else 1.5e-6) / 1e3 + 0.002) * (1 if style.fused else n_ops)
    return t + (0.03 * (1 if style.fused else n_ops) if style.launch == "narrow" else 0.0)


def _profiled(plan: ExpertPlan, style: Style, rng: random.Random) -> str:
    task, k = plan.task, len(plan.task.chain)
    noise = lambda: rng.uniform(0.97, 1.03)  # noqa: E731
    cand = kernel_time_ms(task, plan.backend, style, k) * noise()
    eager = kernel_time_ms(task, plan.backend, None, k) * noise()
    comp = kernel_time_ms(task, plan.backend, Style(vector=True), 1) * 1.03 * noise()
    comp += 0.01 if plan.backend == "cpu" else 0.0  # inductor's CPU wrapper costs more than a plain loop
    method = "events_l2flush" if plan.backend == "cuda" else "host_sync"
    result = CandidateResult(
        task_id=task.id, phase="profile", status=Status.correct, message="outputs match the reference on 9 input sets",
        timing=Timing(median_ms=cand, samples=100, method=method),
        baselines=Baselines(eager=Timing(median_ms=eager, samples=100, method=method),
                            compile=Timing(median_ms=comp, samples=100, method=method), compile_mode="default"),
        speedup_eager=eager / cand, speedup_compile=comp / cand)
    return result.summary_for_agent()


def _describe(style: Style, chain: list[str]) -> str:
    doc = " -> ".join(chain)
    how = "one fused kernel" if style.fused else "one kernel per operator"
    vec = ", float4/simd loads" if style.vector else ""
    return f"Writing {how} for {doc}{vec}, launch {style.launch}."


def expert_turns(plan: ExpertPlan, seed: int = 0) -> list[Turn]:
    """The turns of the expert's episode (the observations as the loop would show them)."""
    from cuda_agent.loop import truncate

    rng = random.Random(f"{seed}:{plan.task.id}:{plan.label}")
    task, backend = plan.task, plan.backend
    sol = write_solution(task.chain, backend, plan.style, plan.bug)
    turns: list[Turn] = []
    writes = [("write_file", {"path": p, "content": c}) for p, c in sol.files.items()]
    obs = [_wrote(p, c) for p, c in sol.files.items()]
    compile_bug = sol.bug is not None and sol.bug.phase == "compile"
    obs.append(_compile_failed(task.id, sol) if compile_bug else _compiled(task.id, 2, backend, rng))
    early = plan.verify_early and not compile_bug
    if early:  # compile and verify in one reply (the loop runs the calls in order)
        wrong = sol.bug is not None and sol.bug.phase == "verify"
        obs.append(_verify_failed(plan, sol, rng) if wrong else _verified(task.id))
    turns.append(_turn(_describe(plan.style, task.chain), writes + [("compile", {})] + ([("verify", {})] if early else []),
                       obs))
    if compile_bug:
        fix = sol.repair()
        turns.append(_turn(f"The compiler points at line {_line_of(sol)}: fixing it and compiling again.",
                           [("edit_file", fix), ("compile", {})],
                           [f"edited {fix['path']}: replaced 1 occurrence", _compiled(task.id, 1, backend, rng)]))
    if sol.bug is not None and sol.bug.phase == "verify":
        if not early:
            turns.append(_turn("Checking correctness.", [("verify", {})], [_verify_failed(plan, sol, rng)]))
        fix = sol.repair()
        turns.append(_turn(f"The outputs differ: the {task.chain[sol.bug.op_index]} step uses the wrong formula. "
                           "Fixing it and verifying again.", [("edit_file", fix), ("verify", {})],
                           [f"edited {fix['path']}: replaced 1 occurrence", _verified(task.id)]))
    elif not early:
        turns.append(_turn("Checking correctness.", [("verify", {})], [_verified(task.id)]))
    turns.append(_turn("Measuring speed against eager and torch.compile.", [("profile", {})],
                       [_profiled(plan, plan.style, rng)]))
    if plan.improve_to is not None:
        better = write_solution(task.chain, backend, plan.improve_to)
        path = better.kernel_path
        turns.append(_turn("Too slow: " + _describe(plan.improve_to, task.chain)[0].lower()
                           + _describe(plan.improve_to, task.chain)[1:],
                           [("write_file", {"path": path, "content": better.files[path]}), ("compile", {})],
                           [_wrote(path, better.files[path]), _compiled(task.id, 1, backend, rng)]))
        turns.append(_turn("Verifying and profiling the new kernel.", [("verify", {}), ("profile", {})],
                           [_verified(task.id), _profiled(plan, plan.improve_to, rng)]))
    turns.append(_turn("Done.", [("finish", {})], ["submitted; the harness will grade your solution"]))
    for t in turns:
        t.observations = [truncate(o, OBSERVATION_LIMIT) for o in t.observations]
    return turns


def _line_of(sol: Solution) -> int:
    return sol.files[sol.kernel_path].splitlines().index(sol.bad_line.rstrip("\n")) + 1


@dataclass
class TokenizedEpisode:
    """Token layout of one expert episode (mask 1 = tokens the policy writes)."""

    token_ids: list[int]
    loss_mask: list[int]
    messages: list[Message]


def episode_tokens(tokenizer: Any, system_prompt: str, task_prompt: str, turns: list[Turn],
                   tools: list[ToolSchema]) -> TokenizedEpisode:
    """The episode's tokens exactly as a token-level policy in the loop records them.

    Each assistant turn is generated as ``encode(text) + [end of turn]``; messages grow as the loop grows
    them (assistant text, then one ``tool`` message per call with id ``call_<turn>_<i>``).
    """
    from cuda_agent.tokenization import TokenizedConversation, encode, end_of_turn_ids

    eot = min(end_of_turn_ids(tokenizer))
    if tokenizer.eos_token_id is not None:
        eot = int(tokenizer.eos_token_id)
    conv = TokenizedConversation(tokenizer)
    messages = [Message(role="system", content=system_prompt), Message(role="user", content=task_prompt)]
    mask: list[int] = []
    for n, turn in enumerate(turns, start=1):
        delta = conv.prompt_delta(messages, tools)
        out = encode(tokenizer, turn.text) + [eot]
        conv.add_generation(out)
        mask += [0] * len(delta) + [1] * len(out)
        messages.append(Message(role="assistant", content=turn.text))
        for i, ((name, _), obs) in enumerate(zip(turn.calls, turn.observations)):
            messages.append(Message(role="tool", content=obs, tool_call_id=f"call_{n}_{i}", name=name))
    return TokenizedEpisode(token_ids=list(conv.ids), loss_mask=mask, messages=messages)


__all__ = ["ExpertPlan", "LAUNCHES", "OBSERVATION_LIMIT", "QualityMix", "SYSTEM_TEMPLATE", "TOOLS", "TokenizedEpisode",
           "Turn", "draw_plan", "episode_tokens", "expert_turns", "kernel_time_ms"]
