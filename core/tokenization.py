"""The tokenization contract of token-level policies (``hf``, ``vllm``) and the trainer.

An episode's token sequence is built only by appending:

1. before the first generation, the chat template renders the system and user
   messages plus the tool schemas with the generation prompt; its tokens are
   the first ``prompt_delta_ids``;
2. the policy generates ``output_ids`` (kept exactly as sampled, never
   re-tokenized);
3. before every later generation, the messages added since (the assistant
   message, tool observations, harness notes) are rendered, and the
   ``prompt_delta_ids`` are the tokens of the *text difference* between the
   render ending with the assistant message and the render of all messages
   with the generation prompt -- preceded by whatever closes the assistant's
   turn in the template that the model did not generate itself (the text after
   the end-of-turn token, e.g. ``"\\n"``, or the end-of-turn token too when
   generation stopped at the length limit).

So the sequence after turn k is an exact prefix of the one after turn k+1.
Templates that rewrite earlier messages when later ones arrive (e.g. drop
reasoning of old assistant turns) break the prefix property of the *text*;
:class:`TokenizedConversation` detects it and raises
:class:`~cuda_agent.errors.TokenizationContractError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cuda_agent.errors import TokenizationContractError
from cuda_agent.schemas.messages import Message, ToolSchema


def template_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the dict shape chat templates expect (OpenAI style, arguments as dicts)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ]
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            d["name"] = m.name
        out.append(d)
    return out


def template_tools(tools: Sequence[ToolSchema] | None) -> list[dict[str, Any]] | None:
    """Tool schemas in the OpenAI function-tool shape, or None when there are none."""
    return [t.openai() for t in tools] if tools else None


def render(tokenizer: Any, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None, *,
           add_generation_prompt: bool) -> str:
    """The chat template's text for ``messages`` (and ``tools``), optionally with the generation prompt."""
    if not getattr(tokenizer, "chat_template", None):
        raise TokenizationContractError(
            f"tokenizer {type(tokenizer).__name__} ({getattr(tokenizer, 'name_or_path', '?')}) has no chat "
            "template; token-level policies need one (set tokenizer.chat_template or use an instruct model)"
        )
    return tokenizer.apply_chat_template(
        template_messages(messages), tools=template_tools(tools), tokenize=False,
        add_generation_prompt=add_generation_prompt,
    )


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` as it appears inside a rendered chat (no BOS/EOS added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def end_of_turn_ids(tokenizer: Any) -> set[int]:
    """Ids that end an assistant turn: the tokenizer's EOS plus ``<|im_end|>``/``<|eot_id|>`` when present."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    for name in ("<|im_end|>", "<|eot_id|>", "<|end|>"):
        if name in vocab:
            ids.add(int(vocab[name]))
    return ids


class TokenizedConversation:
    """The token context of one episode, grown by appending only.

    Call :meth:`prompt_delta` with the full message list before each
    generation (it returns the ids to append and appends them), then
    :meth:`add_generation` with the sampled ids.
    """

    def __init__(self, tokenizer: Any, tools: Sequence[ToolSchema] | None = None) -> None:
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools else None
        self.ids: list[int] = []
        self._eot = end_of_turn_ids(tokenizer)
        self._rendered: str | None = None  # text of the context up to the last generation prompt
        self._messages: list[Message] = []
        self._generated: list[int] | None = None  # ids of the last generation, until the next delta

    def reset(self) -> None:
        """Forget the episode."""
        self.ids, self._rendered, self._messages, self._generated = [], None, [], None

    def prompt_delta(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> list[int]:
        """Ids to append before the next generation; they are appended to :attr:`ids`."""
        messages = list(messages)
        if tools is not None and self._rendered is None:
            self.tools = list(tools) or None
        if self._rendered is None:
            text = render(self.tokenizer, messages, self.tools, add_generation_prompt=True)
            delta = encode(self.tokenizer, text)
        else:
            delta, text = self._next_delta(messages)
        self.ids += delta
        self._rendered, self._messages, self._generated = text, messages, None
        return delta

    def add_generation(self, output_ids: Sequence[int]) -> None:
        """Append the sampled ids of one generation."""
        if self._rendered is None:
            raise TokenizationContractError("add_generation called before the first prompt_delta")
        self._generated = list(output_ids)
        self.ids += self._generated

    def _next_delta(self, messages: list[Message]) -> tuple[list[int], str]:
        n = len(self._messages)
        if self._generated is None:
            raise TokenizationContractError("prompt_delta called twice without a generation in between")
        if len(messages) <= n or messages[:n] != self._messages:
            raise TokenizationContractError(
                f"the message list must extend the previous one (had {n} messages, got {len(messages)}, "
                "earlier messages changed)" if len(messages) > n else
                f"the message list must grow between turns: had {n} messages, got {len(messages)}"
            )
        if messages[n].role != "assistant":
            raise TokenizationContractError(
                f"message {n} after a generation must be the assistant's reply, got role {messages[n].role!r}"
            )
        assistant = render(self.tokenizer, messages[: n + 1], self.tools, add_generation_prompt=False)
        full = render(self.tokenizer, messages, self.tools, add_generation_prompt=True)
        assert self._rendered is not None
        for earlier, later, what in (
            (self._rendered, assistant, "the render with the generation prompt is not a prefix of the render "
                                        "with the assistant reply"),
            (assistant, full, "the render ending with the assistant reply is not a prefix of the next render"),
        ):
            if not later.startswith(earlier):
                at = next((i for i, (a, b) in enumerate(zip(earlier, later)) if a != b), min(len(earlier), len(later)))
                raise TokenizationContractError(
                    f"chat template of {getattr(self.tokenizer, 'name_or_path', '?')} breaks the prefix property: "
                    f"{what} (first difference at character {at}: {earlier[at:at + 40]!r} vs {later[at:at + 40]!r}); "
                    "use a template that renders each message independently of the later ones"
                )
        closing = self._closing(assistant[len(self._rendered):])
        return encode(self.tokenizer, closing + full[len(assistant):]), full

    def _closing(self, assistant_part: str) -> str:
        """Template text after the model's last token that closes the assistant turn."""
        eot_tokens = [self.tokenizer.convert_ids_to_tokens(i) for i in sorted(self._eot)]
        cut = max(((assistant_part.rfind(t), t) for t in eot_tokens), default=(-1, ""))
        if cut[0] < 0:
            return ""  # the template has no end-of-turn token: nothing to close
        tail = assistant_part[cut[0] + len(cut[1]):]
        stopped = bool(self._generated) and self._generated[-1] in self._eot
        return tail if stopped else cut[1] + tail
