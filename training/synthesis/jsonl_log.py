"""Append-only JSONL stage logs that survive ``kill -9``.

Each line is one finished item (keyed by ``id``); a re-run reads the file,
cuts a torn last line, and skips the ids already present. Lines are flushed
and fsynced as written, so a killed build loses at most the item in flight.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any


class JsonlLog:
    """One stage's log: ``done`` ids, ``records`` by id, thread-safe ``append``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        good_end = 0
        if self.path.exists():
            data = self.path.read_bytes()
            pos = 0
            while pos < len(data):
                nl = data.find(b"\n", pos)
                if nl < 0:
                    break  # torn last line (killed mid-write)
                try:
                    rec = json.loads(data[pos:nl])
                except json.JSONDecodeError:
                    break
                self.records[str(rec["id"])] = rec
                pos = good_end = nl + 1
            if good_end < len(data):
                with open(self.path, "r+b") as f:
                    f.truncate(good_end)

    def __contains__(self, item_id: str) -> bool:
        return item_id in self.records

    def append(self, record: dict[str, Any]) -> None:
        """Write one finished item (its ``id`` marks it done)."""
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        with self._lock:
            with open(self.path, "a") as f:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            self.records[str(record["id"])] = record


def write_jsonl_atomic(path: Path, rows: list[dict[str, Any]]) -> None:
    """Replace ``path`` with ``rows`` (write to a temp file, then rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows))
    tmp.replace(path)
