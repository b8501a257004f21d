"""Fixtures of the policy tests: one tiny LM per session, shared by every test here."""

from __future__ import annotations

from cuda_agent.testing.tiny_lm import tiny_lm_fixture

tiny_lm_dir = tiny_lm_fixture()
