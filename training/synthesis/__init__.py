"""Data synthesis: seed operators mined from torch/transformers, composed into
KernelBench-format tasks, filtered by execution, decontaminated and deduplicated.

Stages (``cuda-agent data mine | compose | filter | dedup | build``):

- :mod:`.mine_torch` / :mod:`.mine_transformers` -> :class:`.operators.OperatorSpec` catalog
- :mod:`.compose_rules` (offline) or :mod:`.compose_llm` (any policy plugin) -> task modules
- :mod:`.execution_probe` runs each task in a sandboxed worker; filters in
  ``cuda_agent.plugins.data.filters`` judge the measurements
- :mod:`.dedup` -> AST similarity against KernelBench and MinHash LSH near-duplicates
- :mod:`.pipeline` chains them, resumable, with per-reason drop counts
"""
