"""cuda-agent: agentic RL for CUDA kernel generation.

The import name of the whole distribution. ``cuda_agent`` (this folder, ``core/``)
holds the frozen interfaces (``cuda_agent.schemas``, ``cuda_agent.protocols``),
the plugin machinery (``cuda_agent.hookspecs``, ``cuda_agent.plugins_manager``,
``cuda_agent.registry``), configuration, the agent loop and the CLI. Built-in
components live in ``cuda_agent.plugins``; the trusted execution side in
``cuda_agent.harness``; RL in ``cuda_agent.training``.
"""

__version__ = "0.1.0"

#: Version of the hook specifications. A plugin may declare
#: ``CUDA_AGENT_HOOKSPEC_VERSION`` at module level; a different major number, or
#: a newer minor one, is refused at load time with both numbers in the error.
#: 1.1: ``register_skills``' callback takes ``backend=`` (the backend a skill belongs to).
HOOKSPEC_VERSION = "1.1"

#: Version of the frozen record interfaces (task manifest, CandidateResult,
#: trajectory line, tokenization contract). Bumped on any incompatible change;
#: see docs/interfaces.md for the change log.
INTERFACES_VERSION = "3.7"
