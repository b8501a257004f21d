"""Regenerate trajectories/*.yaml from solutions/ (run from examples/triton-backend)."""

from pathlib import Path

import yaml


def _str(dumper, data):  # type: ignore[no-untyped-def]
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


yaml.add_representer(str, _str, Dumper=yaml.SafeDumper)


def actions_for(solution: Path) -> list[dict]:
    """Read the reference, write model_new.py, compile, verify, profile, finish."""
    code = (solution / "model_new.py").read_text()
    return [
        {"text": "I will read the reference model first.",
         "tool_calls": [{"name": "read_file", "arguments": {"path": "model.py"}}]},
        {"text": "Writing the Triton kernel and ModelNew.",
         "tool_calls": [{"name": "write_file", "arguments": {"path": "model_new.py", "content": code}}]},
        {"text": "Checking the file.", "tool_calls": [{"name": "compile", "arguments": {}}]},
        {"text": "Checking correctness.", "tool_calls": [{"name": "verify", "arguments": {}}]},
        {"text": "Measuring speed against eager and torch.compile.", "tool_calls": [{"name": "profile", "arguments": {}}]},
        {"text": "Done.", "tool_calls": [{"name": "finish", "arguments": {"summary": f"Triton solution of {solution.name}"}}]},
    ]


if __name__ == "__main__":
    for sol in sorted(Path("solutions").iterdir()):
        header = (f"# Scripted trajectory: the honest Triton solution of examples/tasks/{sol.name}.py (the file of "
                  f"solutions/{sol.name}/; tests check it).\n# Replay: cuda-agent run examples/tasks/{sol.name}.py "
                  f"--backend triton --policy scripted:examples/triton-backend/trajectories/{sol.name}.yaml\n")
        text = yaml.safe_dump({"actions": actions_for(sol)}, sort_keys=False, width=200)
        Path(f"trajectories/{sol.name}.yaml").write_text(header + text)
