"""The trusted execution side: workspaces, builds, sandboxed candidate processes,
verification, timing, integrity checks, grading, evaluation runner and reports.

Imports ``cuda_agent`` (core) only; never ``cuda_agent.plugins``.
"""
