"""Fixtures of the policy tests: one tiny LM per session, shared by every test here."""

from __future__ import annotations

from cuda_agent.testing.tiny_lm import tiny_lm_fixture

tiny_lm_dir = tiny_lm_fixture()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:  # makes tests/fakes importable as 'fakes'
    sys.path.insert(0, str(TESTS_DIR))
