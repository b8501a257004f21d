"""Regenerate examples/trajectories/*.yaml from examples/solutions/ (run from the repo root)."""
from pathlib import Path
import yaml

def str_presenter(dumper, data):
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)
yaml.add_representer(str, str_presenter, Dumper=yaml.SafeDumper)

for kind in ("cpu", "cuda"):
    for sol in sorted(Path("examples/solutions", kind).iterdir()):
        name = sol.name
        files = sorted(p for p in sol.rglob("*") if p.is_file())
        writes = [{"name": "write_file", "arguments": {"path": str(p.relative_to(sol)), "content": p.read_text()}} for p in files]
        actions = [
            {"text": "I will read the reference model first.", "tool_calls": [{"name": "read_file", "arguments": {"path": "model.py"}}]},
            {"text": f"Writing a fused {kind.upper()} kernel, its binding and ModelNew.", "tool_calls": writes},
            {"text": "Compiling.", "tool_calls": [{"name": "compile", "arguments": {}}]},
            {"text": "Checking correctness.", "tool_calls": [{"name": "verify", "arguments": {}}]},
            {"text": "Measuring speed against eager and torch.compile.", "tool_calls": [{"name": "profile", "arguments": {}}]},
            {"text": "Done.", "tool_calls": [{"name": "finish", "arguments": {"summary": f"honest {kind} solution of {name}"}}]},
        ]
        header = (f"# Scripted trajectory: the honest {kind} solution of examples/tasks/{name}.py\n"
                  f"# (files identical to examples/solutions/{kind}/{name}/; tests/backends checks it).\n"
                  f"# Replay: cuda-agent run examples/tasks/{name}.py --backend {kind} --policy scripted:examples/trajectories/{name}_{kind}.yaml\n")
        Path(f"examples/trajectories/{name}_{kind}.yaml").write_text(header + yaml.safe_dump({"actions": actions}, sort_keys=False, width=200))
