"""The ``hf`` policy: token-level episodes whose log-probs and token layout the trainer can trust."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cuda_agent.schemas.messages import Message, ToolSchema

TOOLS = [ToolSchema(name="compile", description="Build the extension.", parameters={"type": "object", "properties": {}})]


@pytest.fixture(scope="module")
def policy(tiny_lm_dir: Path):
    """An hf policy over the tiny LM, built through its plugin factory."""
    from cuda_agent.plugins.policies.hf import HFPolicyConfig, build_hf_policy

    return build_hf_policy(HFPolicyConfig(model=str(tiny_lm_dir), max_new_tokens=12, seed=3))


def _episode(policy, turns: int = 3):
    """Drive ``turns`` turns the way the loop does; return messages, outputs and contexts after each turn."""
    policy.reset()
    messages = [Message(role="system", content="You write kernels."), Message(role="user", content="Speed up relu.")]
    outputs, contexts = [], []
    for k in range(turns):
        out = policy.query(list(messages), TOOLS)
        outputs.append(out)
        contexts.append(policy.context_ids)
        messages.append(Message(role="assistant", content=out.text))
        if k % 2 == 0:
            messages.append(Message(role="tool", content=f"compile ok ({k})", tool_call_id=f"call_{k}", name="compile"))
        else:
            messages.append(Message(role="user", content="no tool call found in your reply"))
    return messages, outputs, contexts


def test_logprobs_equal_trainer_recomputation(policy) -> None:
    from cuda_agent.protocols import Policy
    from cuda_agent.training.logprobs import token_logprobs

    assert isinstance(policy, Policy) and policy.token_level

    _, outputs, contexts = _episode(policy)
    ids = torch.tensor([contexts[-1]])
    recomputed = token_logprobs(policy.engine.model, ids)[0]
    pos = 0
    checked = 0
    for out in outputs:
        pos += len(out.prompt_delta_ids)
        for j, (tok, lp) in enumerate(zip(out.output_ids, out.output_logprobs)):
            assert contexts[-1][pos + j] == tok
            assert abs(recomputed[pos + j - 1].item() - lp) < 1e-5, (pos + j, recomputed[pos + j - 1].item(), lp)
            checked += 1
        pos += len(out.output_ids)
    assert pos == len(contexts[-1])
    assert checked >= 3


def test_context_after_turn_k_is_prefix_of_turn_k_plus_1(policy, tiny_lm_dir: Path) -> None:
    from cuda_agent.tokenization import render

    messages, outputs, contexts = _episode(policy, turns=4)
    for before, after in zip(contexts, contexts[1:]):
        assert after[: len(before)] == before
        assert len(after) > len(before)
    rebuilt: list[int] = []
    for out in outputs:
        rebuilt += out.prompt_delta_ids + out.output_ids
    assert rebuilt == contexts[-1]
    # the first delta is the template render of system+user+tools with the generation prompt
    first = render(policy.tokenizer, messages[:2], TOOLS, add_generation_prompt=True)
    assert policy.tokenizer.decode(outputs[0].prompt_delta_ids, skip_special_tokens=False) == first
    # later deltas carry the observations exactly as the template renders them, ending in the generation prompt
    second = policy.tokenizer.decode(outputs[1].prompt_delta_ids, skip_special_tokens=False)
    assert "<|im_start|>tool\n<tool_response>\ncompile ok (0)\n</tool_response><|im_end|>\n" in second
    assert second.endswith("<|im_start|>assistant\n")
    third = policy.tokenizer.decode(outputs[2].prompt_delta_ids, skip_special_tokens=False)
    assert "<|im_start|>user\nno tool call found in your reply<|im_end|>\n" in third


def test_same_seed_reproduces_the_episode(policy) -> None:
    _, first, _ = _episode(policy, turns=2)
    _, again, _ = _episode(policy, turns=2)
    assert [o.output_ids for o in first] == [o.output_ids for o in again]


def test_template_that_rewrites_history_is_refused(tiny_lm_dir: Path) -> None:
    from transformers import AutoTokenizer

    from cuda_agent.errors import TokenizationContractError
    from cuda_agent.tokenization import TokenizedConversation

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    # renders only the last user message: earlier turns vanish from later renders
    tok.chat_template = (
        "{% for m in messages %}{% if loop.last or m['role'] == 'system' %}"
        "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    conv = TokenizedConversation(tok)
    msgs = [Message(role="system", content="s"), Message(role="user", content="u")]
    conv.prompt_delta(msgs)
    conv.add_generation([tok.eos_token_id])
    msgs += [Message(role="assistant", content=""), Message(role="user", content="again")]
    with pytest.raises(TokenizationContractError, match="prefix property"):
        conv.prompt_delta(msgs)


def test_length_cut_generation_is_closed_by_the_next_delta(tiny_lm_dir: Path) -> None:
    from transformers import AutoTokenizer

    from cuda_agent.tokenization import TokenizedConversation

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    conv = TokenizedConversation(tok)
    msgs = [Message(role="user", content="u")]
    conv.prompt_delta(msgs)
    out = tok("abc", add_special_tokens=False)["input_ids"]  # no end-of-turn: cut by the length limit
    conv.add_generation(out)
    msgs += [Message(role="assistant", content="abc"), Message(role="tool", content="obs", tool_call_id="c")]
    delta = conv.prompt_delta(msgs)
    assert tok.decode(delta, skip_special_tokens=False).startswith("<|im_end|>\n<|im_start|>tool\n")
    full = tok.apply_chat_template([{"role": "user", "content": "u"}, {"role": "assistant", "content": "abc"},
                                    {"role": "tool", "content": "obs"}], tokenize=False, add_generation_prompt=True)
    assert tok.decode(conv.ids, skip_special_tokens=False) == full


def test_context_limit_ends_the_episode_as_a_token_limit(tiny_lm_dir: Path) -> None:
    from cuda_agent.control import LimitsExceeded
    from cuda_agent.plugins.policies.hf import HFPolicyConfig, build_hf_policy

    small = build_hf_policy(HFPolicyConfig(model=str(tiny_lm_dir), max_new_tokens=4, max_context_tokens=20))
    with pytest.raises(LimitsExceeded) as info:
        small.query([Message(role="user", content="a prompt longer than twenty tokens " * 3)], [])
    assert info.value.exit == "max_tokens" and "max_context_tokens=20" in str(info.value.message)


def test_the_policy_generates_only_while_no_timing_holds_its_device(policy, tiny_lm_dir: Path) -> None:
    """A candidate timed while the policy's kernels share the device reads slower. The hf policy generates under
    the timing lock of its device (here the CPU's, the cpu backend's evaluator lock): while a timing holds it, a
    turn waits; ``exclusive_device: false`` turns that off."""
    import threading
    import time

    from cuda_agent.harness.timing_stats import device_timing_lock
    from cuda_agent.plugins.policies.hf import HFPolicyConfig, build_hf_policy

    assert policy.engine.hold.lock.path == device_timing_lock("cpu", 0).path
    finished: list[float] = []

    def turn() -> None:
        policy.reset()
        policy.query([Message(role="system", content="s"), Message(role="user", content="u")], TOOLS)
        finished.append(time.monotonic())

    with device_timing_lock("cpu", 0):  # a timed batch in progress (this thread holds the flock)
        t = threading.Thread(target=turn)
        t.start()
        t.join(timeout=1.5)
        assert t.is_alive() and not finished  # waiting for the timing to end
        released = time.monotonic()
    t.join(timeout=60)
    assert finished and finished[0] >= released
    with device_timing_lock("cpu", 0).shared():  # untimed work (a check) on the device: the turn runs beside it
        finished.clear()
        t = threading.Thread(target=turn)
        t.start()
        t.join(timeout=60)
        assert finished
    off = build_hf_policy(HFPolicyConfig(model=str(tiny_lm_dir), max_new_tokens=4, exclusive_device=False))
    with device_timing_lock("cpu", 0):  # nothing held by the policy: it generates beside a timing
        off.query([Message(role="system", content="s"), Message(role="user", content="u")], TOOLS)
