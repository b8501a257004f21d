"""The tiny test LM: offline build, deterministic weights, a chat template with tools."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cuda_agent.testing.tiny_lm import build_tiny_lm, cached_tiny_lm


def _digest(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_loads_with_auto_classes_and_head_dim_64(tiny_lm_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    assert model.config.head_dim == 64
    assert model.config.vocab_size == len(tok) == 512
    assert tok.eos_token == "<|im_end|>"
    # protocol markers are single tokens and survive decoding
    ids = tok("<tool_call>{}</tool_call>", add_special_tokens=False)["input_ids"]
    assert len(ids) == 4
    assert tok.decode(ids) == "<tool_call>{}</tool_call>"


def test_chat_template_renders_every_role_and_tool_calls(tiny_lm_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    tools = [{"type": "function", "function": {"name": "compile", "description": "build", "parameters": {}}}]
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "A", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "compile", "arguments": {"x": 1}}}]},
        {"role": "tool", "content": "OBS", "tool_call_id": "c1"},
    ]
    text = tok.apply_chat_template(msgs, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nS\n\n# Tools")
    assert '"name": "compile"' in text
    assert '<tool_call>{"name": "compile", "arguments": {"x": 1}}</tool_call><|im_end|>\n' in text
    assert "<|im_start|>tool\n<tool_response>\nOBS\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n")
    # every prefix of the conversation renders as a prefix of the whole
    for k in range(1, len(msgs)):
        assert text.startswith(tok.apply_chat_template(msgs[:k], tools=tools, tokenize=False))


def test_same_seed_same_weights_other_seed_differs(tiny_lm_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_lm(tmp_path / "again")
    other = build_tiny_lm(tmp_path / "other", seed=1)
    assert _digest(again) == _digest(tiny_lm_dir)
    assert _digest(other) != _digest(tiny_lm_dir)
    assert (again / "tokenizer.json").read_bytes() == (tiny_lm_dir / "tokenizer.json").read_bytes()


def test_qwen2_arch_and_cache_reuse(tmp_path: Path) -> None:
    first = cached_tiny_lm(tmp_path, arch="qwen2", layers=1)
    assert '"model_type": "qwen2"' in (first / "config.json").read_text()
    assert cached_tiny_lm(tmp_path, arch="qwen2", layers=1) == first


def test_too_small_vocab_is_refused_with_the_minimum(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="vocab >= "):
        build_tiny_lm(tmp_path, vocab=100)
