"""structlog setup: JSON lines when asked (or not a TTY), console otherwise; bad levels refused."""

from __future__ import annotations

import json

import pytest
import structlog

from cuda_agent.logging import configure_logging


@pytest.fixture(autouse=True)
def _restore_structlog():
    yield
    structlog.reset_defaults()


def test_json_and_console(capsys):
    configure_logging("info", json_output=True)
    structlog.get_logger("t").info("hello", turn=3)
    structlog.get_logger("t").debug("hidden")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["event"] == "hello" and record["turn"] == 3 and record["level"] == "info"
    configure_logging("debug", json_output=False)
    structlog.get_logger("t").debug("visible")
    assert "visible" in capsys.readouterr().err
    with pytest.raises(ValueError, match="valid: debug, info, warning, error"):
        configure_logging("loud")
