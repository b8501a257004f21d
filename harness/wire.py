"""The one wire format between the harness and its child processes: typed messages as JSON lines.

Both child processes (the trusted reference process, :mod:`cuda_agent.harness.reference`, and the sandboxed
candidate runner, :mod:`cuda_agent.harness.candidate_runner`) read requests and write replies over two inherited
pipe descriptors, one JSON object per line. A request is a :class:`Request` subclass (its ``op`` names it and its
``Reply`` class says what comes back); a reply is that class with ``ok: true``, or a :class:`Failure` with
``ok: false``. Nothing is pickled: what the candidate's process writes is parsed as JSON and validated against the
reply's model before the trusted side uses any of it (a line that does not fit is a :class:`WireError`). File
descriptors (memory files, exported device allocations) travel beside the messages over a Unix socket
(:mod:`cuda_agent.harness._vmm`), announced by a count in the message.

The message classes themselves are in :mod:`cuda_agent.harness.messages`.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

#: A line longer than this is refused (a flood, not a message).
MAX_LINE_BYTES = 64 * 2**20


class WireError(Exception):
    """A line that is not a message of the expected kind (the text says which and why)."""


class Message(BaseModel):
    """Base of every message: unknown fields are refused (a typo or a forged field fails loudly)."""

    model_config = ConfigDict(extra="forbid")


class Reply(Message):
    """A successful reply (``ok: true``)."""

    ok: Literal[True] = True


class Failure(Message):
    """A failed request: what went wrong in the child, and its traceback."""

    ok: Literal[False] = False
    error: str
    traceback: str = ""
    #: Candidate runner only: the descriptors of an input set could not be read (the trusted side hands the set over
    #: through files instead); any other failure is the candidate's.
    fd_error: bool = False


class Request(Message):
    """A request: ``op`` is the class's name on the wire, ``Reply`` the class of its successful reply."""

    op: ClassVar[str] = ""
    Reply: ClassVar[type[Reply]] = Reply


def encode(msg: Message) -> bytes:
    """One line: the message's fields as JSON, with ``op`` first for a request."""
    body = msg.model_dump(mode="json")
    if isinstance(msg, Request):
        body = {"op": msg.op, **body}
    return (json.dumps(body, separators=(",", ":")) + "\n").encode()


def _object(line: bytes | str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise WireError(f"not JSON: {bytes(line[:200]) if isinstance(line, bytes) else line[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise WireError(f"a message is a JSON object, got {type(obj).__name__}")
    return obj


def decode_request(line: bytes | str, table: dict[str, type[Request]]) -> Request:
    """The request ``line`` holds, as the class ``table`` names for its ``op``."""
    obj = _object(line)
    op = obj.pop("op", None)
    cls = table.get(op) if isinstance(op, str) else None
    if cls is None:
        raise WireError(f"unknown op {op!r}; valid: {sorted(table)}")
    try:
        return cls.model_validate(obj)
    except ValidationError as exc:
        raise WireError(f"{op}: {exc}") from exc


def decode_reply(line: bytes | str, cls: type[Reply]) -> Reply | Failure:
    """The reply ``line`` holds: a ``cls`` (``ok: true``) or a :class:`Failure`."""
    obj = _object(line)
    try:
        return Failure.model_validate(obj) if obj.get("ok") is False else cls.model_validate(obj)
    except ValidationError as exc:
        raise WireError(f"reply to a {cls.__name__.lower()} request does not fit: {exc}") from exc


class LineReader:
    """Reads lines from a pipe descriptor with a deadline (the parent side of a channel)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()
        self._scanned = 0  # bytes of the buffer known to hold no newline

    def read_line(self, timeout_s: float, on_idle: Callable[[], None] | None = None) -> bytes | None:
        """The next line (without its newline); None when ``timeout_s`` passes first. ``on_idle`` runs about twice
        a second while nothing arrives (it may raise, e.g. when the child died). Raises :class:`EOFError` at the end
        of the stream and :class:`WireError` on a line over :data:`MAX_LINE_BYTES`."""
        deadline = time.monotonic() + timeout_s
        while (end := self._buf.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._buf)
            if self._scanned > MAX_LINE_BYTES:
                raise WireError(f"more than {MAX_LINE_BYTES >> 20} MiB without a newline")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if not ready:
                if on_idle is not None:
                    on_idle()
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError("the other end closed the channel")
            self._buf += chunk
        line = bytes(self._buf[:end])
        del self._buf[:end + 1]
        self._scanned = 0
        return line


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (a pipe may take a long message in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
