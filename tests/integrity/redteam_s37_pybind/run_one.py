"""Run one fixture through score_one and print the row (manual red-team driver)."""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tests.integrity.conftest import score_one  # noqa: E402

KB_REDUCED = "kernelbench:" + str(Path(__file__).resolve().parents[2] / "kernelbench" / "data") + "?sizes=reduced"

mod, attr = sys.argv[1], sys.argv[2]
fixture = __import__(mod)
files = getattr(fixture, attr)
if callable(files):
    files = files()
task = sys.argv[3] if len(sys.argv) > 3 else "19_ReLU"
with tempfile.TemporaryDirectory() as d:
    row = score_one(Path(d), task, files, tasks=KB_REDUCED)
print(json.dumps({k: row.get(k) for k in ("status", "rule", "reward", "message", "errors", "flags", "speedup_eager",
                                          "speedup_compile")}, indent=1, default=str)[:4000])
