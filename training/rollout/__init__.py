"""Rollout engines: token-in/token-out generation with log-probs and weight sync.

``hf_engine.HFRolloutEngine`` (local transformers model) and
``vllm_engine.VLLMRolloutEngine`` (in-process ``vllm.LLM`` or a vLLM server)
implement :class:`cuda_agent.protocols.RolloutEngine`. Import the submodule you
need: this package imports neither torch nor vllm.
"""
