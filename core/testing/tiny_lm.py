"""Tiny random causal language models with a locally trained tokenizer, for tests.

Everything is built offline: the model is randomly initialised from a config
(``LlamaConfig`` or ``Qwen2Config``), the tokenizer is a byte-level BPE trained
with the ``tokenizers`` library on a small built-in corpus, wrapped as a
transformers fast tokenizer carrying a ChatML-style jinja chat template that
renders ``system``/``user``/``assistant``/``tool`` messages, native tool calls
and tool schemas. Every message renders independently of the messages after
it, so the tokenization contract's prefix property holds
(:mod:`cuda_agent.tokenization`).

The default head dimension is 64 (one head per 64 hidden units), the only
small size vLLM's CPU attention backend accepts.

Usage in a test suite::

    # conftest.py
    from cuda_agent.testing.tiny_lm import tiny_lm_fixture
    tiny_lm_dir = tiny_lm_fixture()            # session-scoped fixture -> Path

    # a test
    def test_something(tiny_lm_dir):
        model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)

or directly ``build_tiny_lm(path)`` / ``cached_tiny_lm()`` (a per-machine cache
shared between processes, e.g. a vLLM test subprocess and the trainer).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

#: Version of the recipe below; bump it when the corpus, template or tokenizer
#: settings change so cached builds are rebuilt.
RECIPE_VERSION = "1"

#: Role and end-of-turn tokens (special: never produced by BPE merges).
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
#: Tool-protocol markers: single tokens, but kept when decoding (not "special").
PROTOCOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

#: ChatML-style template. Each message renders as
#: ``<|im_start|>ROLE\\nCONTENT<|im_end|>\\n`` whatever follows it, the tool
#: schemas go into the first (system) block, native tool calls render as
#: ``<tool_call>{json}</tool_call>`` lines, tool observations are wrapped in
#: ``<tool_response>`` tags; the generation prompt is ``<|im_start|>assistant\\n``.
CHAT_TEMPLATE = (
    "{% if tools %}"
    "{{ '<|im_start|>system\\n' }}"
    "{% if messages and messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n\\n' }}{% endif %}"
    "{{ '# Tools\\nCall a tool with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>. Tools:' }}"
    "{% for tool in tools %}{{ '\\n' + (tool | tojson) }}{% endfor %}"
    "{{ '<|im_end|>\\n' }}"
    "{% elif messages and messages[0]['role'] == 'system' %}"
    "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% if not loop.first %}{{ '<|im_start|>system\\n' + message['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|im_start|>tool\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' + (message['content'] if message['content'] else '') }}"
    "{% if message['tool_calls'] %}{% for call in message['tool_calls'] %}"
    "{% set fn = call['function'] if call['function'] is defined else call %}"
    "{{ '\\n<tool_call>{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' }}"
    "{{ (fn['arguments'] if fn['arguments'] is string else (fn['arguments'] | tojson)) + '}</tool_call>' }}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS_SNIPPETS = [
    "You are a CUDA kernel engineer. Write fast, correct kernels.",
    "Replace the PyTorch operators of the reference Model with custom CUDA kernels in ModelNew.",
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return torch.relu(x)\n",
    "def get_inputs():\n    return [torch.randn(4096, 393216)]\n\ndef get_init_inputs():\n    return []\n",
    "#include <cuda_runtime.h>\n__global__ void relu_kernel(const float* x, float* y, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;\n}\n",
    "torch::Tensor relu_forward(torch::Tensor x) {\n    auto y = torch::empty_like(x);\n"
    "    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);\n    return y;\n}\n",
    '{"name": "write_file", "arguments": {"path": "kernels/relu.cu", "content": "..."}}',
    '{"name": "compile", "arguments": {}}',
    '{"name": "verify", "arguments": {}}',
    '{"name": "profile", "arguments": {}}',
    '{"name": "read_file", "arguments": {"path": "model.py"}}',
    '{"name": "finish", "arguments": {}}',
    "compile ok in 1.6 s. verify: 5/5 input sets correct. speedup vs eager 1.32x, vs torch.compile 1.08x.",
    "error: identifier \"blockIdx\" is undefined; expected a ';'; max abs diff 0.0031 at index (3, 17)",
    "The quick brown fox jumps over the lazy dog. 0123456789 + - * / = < > ( ) [ ] { } _ . , : ; ' \" # @ !",
]

_BASE_MODULES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}


def _corpus() -> list[str]:
    """The training text of the tokenizer: snippets plus chat-template scaffolding."""
    lines = list(_CORPUS_SNIPPETS)
    for role in ("system", "user", "assistant", "tool"):
        lines.append(f"<|im_start|>{role}\nhello world<|im_end|>\n")
    return lines * 4


def build_tokenizer(out_dir: Path, *, vocab: int = 512, corpus: Iterable[str] | None = None,
                    chat_template: str | None = None, model_max_length: int = 4096) -> Any:
    """Train a byte-level BPE tokenizer locally and save it (transformers format) to ``out_dir``.

    :param vocab: vocabulary size (byte tokens, special and protocol tokens included).
    :param corpus: training texts; default the small built-in corpus (tests). A policy trained from scratch
        passes its own synthesized episodes (``cuda_agent.training.kernel_family.corpus``).
    :param chat_template: jinja chat template; default :data:`CHAT_TEMPLATE` (renders tool schemas too).
    :param model_max_length: the tokenizer's recorded context length.
    :returns: the ``PreTrainedTokenizerFast`` instance that was saved.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    n_fixed = 256 + len(SPECIAL_TOKENS) + len(PROTOCOL_TOKENS)
    if vocab < n_fixed + 16:
        raise ValueError(
            f"tiny tokenizer vocab={vocab} is too small: byte-level BPE needs 256 byte tokens plus "
            f"{len(SPECIAL_TOKENS) + len(PROTOCOL_TOKENS)} special ones; use vocab >= {n_fixed + 16}"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab - len(PROTOCOL_TOKENS),
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus() if corpus is None else corpus, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in PROTOCOL_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"],
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE if chat_template is None else chat_template
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    return fast


def build_tiny_lm(
    dir: Path | str,
    *,
    arch: Literal["llama", "qwen2"] = "llama",
    hidden: int = 64,
    layers: int = 2,
    vocab: int = 512,
    heads: int | None = None,
    intermediate: int | None = None,
    max_positions: int = 4096,
    seed: int = 0,
) -> Path:
    """Save a random-init causal LM plus its locally trained tokenizer to ``dir``; return ``dir``.

    :param arch: ``"llama"`` (LlamaConfig) or ``"qwen2"`` (Qwen2Config).
    :param hidden: hidden size; ``heads`` defaults to ``hidden // 64`` so the head dim is 64.
    :param layers: decoder layers.
    :param vocab: tokenizer (and embedding) vocabulary size.
    :param seed: the weights are a deterministic function of the seed and the sizes.

    Offline: no hub access. The folder loads with ``AutoModelForCausalLM`` /
    ``AutoTokenizer.from_pretrained(dir)`` and with ``vllm.LLM(model=dir)``.
    """
    import torch
    import transformers

    if arch not in _BASE_MODULES:
        raise ValueError(f"unknown tiny LM arch {arch!r}; valid: {', '.join(_BASE_MODULES)}")
    heads = heads if heads is not None else max(1, hidden // 64)
    if hidden % heads:
        raise ValueError(f"hidden={hidden} is not divisible by heads={heads}")
    out = Path(dir)
    tokenizer = build_tokenizer(out, vocab=vocab)
    config_cls = getattr(transformers, _BASE_MODULES[arch][0])
    model_cls = getattr(transformers, _BASE_MODULES[arch][1])
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=hidden // heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = model_cls(config)
        # Random init gives near-uniform next-token distributions; a larger
        # output scale makes sampled text less degenerate and log-probs varied.
        with torch.no_grad():
            model.lm_head.weight.mul_(8.0)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    model.save_pretrained(str(out))
    (out / "tiny_lm.json").write_text(
        json.dumps(
            {"recipe": RECIPE_VERSION, "arch": arch, "hidden": hidden, "layers": layers, "vocab": vocab,
             "heads": heads, "seed": seed},
            indent=1,
        )
    )
    return out


def cached_tiny_lm(cache_dir: Path | str | None = None, **kwargs: Any) -> Path:
    """A tiny LM built once per machine and reused across processes.

    The folder is ``<cache_dir>/tiny_lm-<hash of recipe and kwargs>``; the
    default ``cache_dir`` is ``$CUDA_AGENT_CACHE`` or ``~/.cache/cuda-agent``.
    Built in a temporary folder and renamed into place, so concurrent callers
    never see a half-written model.
    """
    base = Path(cache_dir or os.environ.get("CUDA_AGENT_CACHE") or Path.home() / ".cache" / "cuda-agent")
    key = hashlib.sha256(json.dumps({"recipe": RECIPE_VERSION, **kwargs}, sort_keys=True).encode()).hexdigest()[:12]
    target = base / f"tiny_lm-{key}"
    if (target / "tiny_lm.json").exists():
        return target
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny_lm-", dir=base))
    try:
        build_tiny_lm(tmp, **kwargs)
        try:
            tmp.rename(target)
        except OSError:  # another process won the race: use its copy
            if not (target / "tiny_lm.json").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def tiny_lm_fixture(name: str = "tiny_lm_dir", **kwargs: Any) -> Callable[..., Path]:
    """A session-scoped pytest fixture building a tiny LM once per test session.

    Assign it at module level in a ``conftest.py``:
    ``tiny_lm_dir = tiny_lm_fixture()`` (or ``tiny_qwen = tiny_lm_fixture("tiny_qwen", arch="qwen2")``).
    ``kwargs`` go to :func:`build_tiny_lm`.
    """
    import pytest

    @pytest.fixture(scope="session", name=name)
    def _fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return build_tiny_lm(tmp_path_factory.mktemp(name), **kwargs)

    return _fixture
