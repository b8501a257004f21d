"""A token-level policy over any rollout engine: the shared body of the ``hf`` and ``vllm`` policies.

It keeps the episode's token context by the tokenization contract
(:class:`cuda_agent.tokenization.TokenizedConversation`), sends the whole
context to the engine as token ids, and returns ``prompt_delta_ids``,
``output_ids`` and ``output_logprobs`` so the trajectory holds exactly the
ids the model saw.
"""

from __future__ import annotations

import time
from typing import Any

from cuda_agent.control import LimitsExceeded
from cuda_agent.protocols import RolloutEngine, SamplingParams
from cuda_agent.schemas.messages import Message, PolicyOutput, ToolSchema
from cuda_agent.tokenization import TokenizedConversation, end_of_turn_ids


class ContextTooLong(LimitsExceeded):
    """The episode's token context reached the configured maximum (the loop ends with exit 'max_tokens')."""

    def __init__(self, message: str) -> None:
        super().__init__("max_tokens", message)


class EngineTokenPolicy:
    """:class:`cuda_agent.protocols.Policy` generating through a :class:`RolloutEngine`.

    :param engine: token-in/token-out engine.
    :param tokenizer: the model's tokenizer (chat template required).
    :param params: sampling settings; ``seed`` (if set) is offset by the turn index.
    :param max_context_tokens: refuse to generate past this many context tokens (None = no limit).
    """

    token_level = True

    def __init__(self, engine: RolloutEngine, tokenizer: Any, params: SamplingParams,
                 max_context_tokens: int | None = None) -> None:
        self.engine, self.tokenizer, self.params = engine, tokenizer, params
        self.max_context_tokens = max_context_tokens
        self.conversation = TokenizedConversation(tokenizer)
        self._eot = end_of_turn_ids(tokenizer)
        self._turn = 0

    def reset(self) -> None:
        """Start a new episode (empty token context)."""
        self.conversation.reset()
        self._turn = 0

    @property
    def context_ids(self) -> list[int]:
        """All token ids of the episode so far."""
        return list(self.conversation.ids)

    def query(self, messages: list[Message], tools: list[ToolSchema]) -> PolicyOutput:
        """Append the new messages' tokens, generate, and return the turn (token record included)."""
        t0 = time.monotonic()
        delta = self.conversation.prompt_delta(messages, tools)
        context = self.conversation.ids
        budget = self.params.max_new_tokens
        if self.max_context_tokens is not None:
            budget = min(budget, self.max_context_tokens - len(context))
            if budget <= 0:
                raise ContextTooLong(
                    f"episode context is {len(context)} tokens, at or past max_context_tokens={self.max_context_tokens}"
                )
        seed = None if self.params.seed is None else self.params.seed + self._turn
        params = self.params.model_copy(update={"max_new_tokens": budget, "seed": seed})
        gen = self.engine.generate([list(context)], params)[0]
        self.conversation.add_generation(gen.output_ids)
        self._turn += 1
        shown = gen.output_ids[:-1] if gen.output_ids and gen.output_ids[-1] in self._eot else gen.output_ids
        return PolicyOutput(
            text=self.tokenizer.decode(shown, skip_special_tokens=False),
            prompt_delta_ids=delta,
            output_ids=list(gen.output_ids),
            output_logprobs=list(gen.logprobs),
            finish_reason=gen.finish_reason,
            usage={"prompt_tokens": len(context), "completion_tokens": len(gen.output_ids)},
            latency_s=time.monotonic() - t0,
        )
