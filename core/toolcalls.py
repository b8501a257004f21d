"""The tool-call text protocol: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Several blocks per turn are allowed. Each malformed block becomes an error
string (shown to the model as a format-error observation); the valid ones
still run.
"""

from __future__ import annotations

import json
import re

from cuda_agent.schemas.messages import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.DOTALL)
EXAMPLE = OPEN + '{"name": "read_file", "arguments": {"path": "model.py"}}' + CLOSE


def parse_tool_calls(text: str, turn: int) -> tuple[list[ToolCall], list[str]]:
    """Parse every block of ``text``: (calls with ids ``call_<turn>_<i>``, error messages)."""
    calls: list[ToolCall] = []
    errors: list[str] = []
    for i, match in enumerate(_BLOCK.finditer(text)):
        body = match.group(1).strip()
        call, error = _parse_block(body, i)
        if error:
            errors.append(error)
        else:
            calls.append(ToolCall(id=f"call_{turn}_{i}", name=call[0], arguments=call[1]))
    tail = text[text.rfind(CLOSE) + len(CLOSE):] if CLOSE in text else text
    if OPEN in tail:
        errors.append(f"a {OPEN} block is not closed with {CLOSE}; write each call as {EXAMPLE}")
    return calls, errors


def _parse_block(body: str, index: int) -> tuple[tuple[str, dict], str | None]:
    where = f"tool call #{index + 1}"
    if body.startswith("```"):  # tolerate a fenced JSON body
        body = body.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return ("", {}), f"{where}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); expected {EXAMPLE}"
    if not isinstance(data, dict):
        return ("", {}), f"{where}: expected a JSON object with 'name' and 'arguments', got {type(data).__name__}"
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return ("", {}), f"{where}: missing 'name' (a string); expected {EXAMPLE}"
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):  # OpenAI style: arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return ("", {}), f"{where} ({name}): 'arguments' is a string that is not valid JSON ({exc.msg})"
    if not isinstance(args, dict):
        return ("", {}), f"{where} ({name}): 'arguments' must be a JSON object, got {type(args).__name__}"
    unknown = set(data) - {"name", "arguments", "parameters"}
    if unknown:
        return ("", {}), f"{where} ({name}): unexpected keys {sorted(unknown)}; only 'name' and 'arguments'"
    return (name, args), None
