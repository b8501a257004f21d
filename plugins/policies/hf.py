"""``hf`` policy: a local transformers causal LM, token-level (``--policy hf:/path/to/model``).

Token-in/token-out with log-probs through
:class:`cuda_agent.training.rollout.hf_engine.HFRolloutEngine`; the episode's
token context follows the tokenization contract, so the trajectory's token
record is what the trainer consumes. torch/transformers load only when the
policy is built.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl


class HFPolicyConfig(BaseModel):
    """Config of the ``hf`` policy (block ``plugins.hf`` or ``--policy hf:MODEL?k=v``)."""

    model_config = ConfigDict(extra="forbid")
    spec_target: ClassVar[str] = "model"

    model: str = Field(description="Folder written by save_pretrained holding the model and its tokenizer.")
    device: str = Field("cpu", description="Torch device: 'cpu', 'cuda', 'cuda:1'.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="Weights dtype.")
    max_new_tokens: int = Field(1024, ge=1, description="Tokens generated at most per turn.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")
    seed: int | None = Field(0, description="Sampling seed (offset by the turn index); None = random.")
    stop: list[str] = Field(default_factory=list, description="Extra stop strings (EOS always stops).")
    max_context_tokens: int | None = Field(None, ge=1, description="Episode context limit in tokens; None = none.")
    batch_across_episodes: bool = Field(
        False,
        description="Share one engine among the policies of this process with the same model, device and dtype, and "
                    "batch the generate calls of concurrent episodes (e.g. cuda-agent eval --concurrency N): a server "
                    "thread serves every request pending when it is free as one left-padded, KV-cached batch.",
    )
    max_batch: int = Field(64, ge=1, description="With batch_across_episodes: rows of one batch at most.")
    batching: Literal["batch", "continuous"] = Field(
        "batch",
        description="With batch_across_episodes: 'batch' serves the waiting requests as one batch answered when its "
                    "longest row ends; 'continuous' lets rows join the live batch between decode steps and returns "
                    "each the moment it ends (a short tool call never waits for another episode's long one).",
    )
    exclusive_device: bool = Field(
        True,
        description="Generate while holding the lock of the policy's device (cuda:N, or the CPU) in its shared "
                    "mode; every harness process on the machine times that device under its exclusive mode: no "
                    "candidate or baseline is timed while this policy's kernels share the device (they would read "
                    "slower), while untimed work (checks, other policies' generation) may run beside it. False "
                    "only when nothing is timed on the policy's device.",
    )


def build_hf_policy(config: HFPolicyConfig) -> Any:
    """Load the model and tokenizer and wrap them as a token-level policy."""
    from pathlib import Path

    from transformers import AutoTokenizer

    from cuda_agent.errors import ConfigError
    from cuda_agent.protocols import SamplingParams
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine
    from cuda_agent.training.rollout.token_policy import EngineTokenPolicy

    path = Path(config.model)
    if not (path / "config.json").exists():
        raise ConfigError(
            f"hf policy: model {config.model!r} is not a save_pretrained folder (no config.json there); "
            "give a local folder, e.g. --policy hf:/models/qwen2.5-coder-7b"
        )
    params = SamplingParams(max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                            top_p=config.top_p, seed=config.seed, stop=config.stop)
    from cuda_agent.harness.timing_stats import generation_hold

    hold = generation_hold(config.device) if config.exclusive_device else None
    if config.batch_across_episodes:
        engine, tokenizer = _shared_engine(str(path.resolve()), config.device, config.dtype, config.max_batch, hold,
                                           config.batching)
    else:
        from cuda_agent.training.rollout.batching import HeldEngine

        tokenizer = AutoTokenizer.from_pretrained(path)
        engine = HFRolloutEngine(path, tokenizer, device=config.device, dtype=config.dtype, batch_size=1)
        if hold is not None:
            engine = HeldEngine(engine, hold)
    return EngineTokenPolicy(engine, tokenizer, params, max_context_tokens=config.max_context_tokens)


_SHARED: dict[tuple[str, str, str, bool, str], tuple[Any, Any]] = {}
_SHARED_LOCK = threading.Lock()


def _shared_engine(model: str, device: str, dtype: str, max_batch: int, hold: Any = None,
                   batching: str = "batch") -> tuple[Any, Any]:
    """The process's one shared engine (and tokenizer) for (model, device, dtype, batching), built on first use:
    a batching server holding ``hold`` per batch, or a continuous engine holding it per decode step."""
    from transformers import AutoTokenizer

    from cuda_agent.training.rollout.batching import BatchingEngine
    from cuda_agent.training.rollout.continuous_serving import ContinuousEngine
    from cuda_agent.training.rollout.hf_engine import HFRolloutEngine

    key = (model, device, dtype, hold is not None, batching)
    with _SHARED_LOCK:
        if key not in _SHARED:
            tokenizer = AutoTokenizer.from_pretrained(model)
            engine = HFRolloutEngine(model, tokenizer, device=device, dtype=dtype, batch_size=max_batch)
            if batching == "continuous":
                engine.step_hold = hold
                _SHARED[key] = (ContinuousEngine(engine, max_rows=max_batch), tokenizer)
            else:
                _SHARED[key] = (BatchingEngine(engine, hold=hold), tokenizer)
        return _SHARED[key]


@hookimpl
def register_policies(register) -> None:
    """Register ``hf``."""
    register("hf", build_hf_policy, config_model=HFPolicyConfig,
             description="Local transformers causal LM, token-in/token-out with log-probs.")
