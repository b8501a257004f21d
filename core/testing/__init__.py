"""Test helpers for cuda-agent and for plugin authors.

- Conformance checks (:mod:`cuda_agent.testing.conformance`, :mod:`cuda_agent.testing.backends`):
  :func:`check_tool`, :func:`check_reward`, :func:`check_backend` (with ``evaluate=True``: the honest solution
  verifies, every cheat fixture fails), :func:`check_adapter` (the device-adapter protocol), :func:`check_skill`
  (the backend's skill is registered for it) raise :class:`ConformanceError` (an ``AssertionError``) listing every
  problem; :func:`milestone_ladder` and :func:`make_result` build graded results for reward tests.
- :mod:`cuda_agent.testing.tiny_lm`: tiny random causal LMs with a locally
  trained tokenizer, for token-level tests.
"""

from cuda_agent.testing.backends import check_adapter, check_backend, check_skill
from cuda_agent.testing.conformance import (
    ConformanceError,
    assert_conforms,
    check_reward,
    check_tool,
    make_result,
    milestone_ladder,
)

__all__ = [
    "ConformanceError",
    "assert_conforms",
    "check_adapter",
    "check_backend",
    "check_skill",
    "check_reward",
    "check_tool",
    "make_result",
    "milestone_ladder",
]
