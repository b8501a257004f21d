"""File tools confined to the workspace: read_file, write_file, edit_file, list_files.

Every path goes through :meth:`cuda_agent.protocols.Workspace.resolve`, so
escapes and protected files are refused with a reason the model can read.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.hookspecs import hookimpl
from cuda_agent.protocols import ToolContext, ToolOutput


class ReadFileArgs(BaseModel):
    """Arguments of read_file."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace root, e.g. 'model.py'.")
    start_line: int | None = Field(None, ge=1, description="First line to show (1-based); default the first.")
    end_line: int | None = Field(None, ge=1, description="Last line to show (inclusive); default the last.")


class ReadFileTool:
    """Read a text file of the workspace."""

    name = "read_file"
    description = "Read a file of the workspace (optionally a line range). Paths are relative to the workspace root."
    Args = ReadFileArgs

    def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
        """Return the file's text (or the requested lines)."""
        text = ctx.workspace.read(args.path)
        if args.start_line is None and args.end_line is None:
            return ToolOutput(content=text if text else "(empty file)")
        lines = text.splitlines(keepends=True)
        start = (args.start_line or 1) - 1
        end = args.end_line or len(lines)
        if start >= len(lines):
            return ToolOutput(content=f"{args.path} has {len(lines)} lines; start_line {start + 1} is past the end", is_error=True)
        return ToolOutput(content="".join(lines[start:end]))


class WriteFileArgs(BaseModel):
    """Arguments of write_file."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace root, e.g. 'kernels/relu.cu'.")
    content: str = Field(description="The complete new content of the file.")


class WriteFileTool:
    """Create or overwrite a workspace file."""

    name = "write_file"
    description = "Create or overwrite a file in the workspace with the given content (parent folders are created)."
    Args = WriteFileArgs

    def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        """Write the file and report its size."""
        ctx.workspace.write(args.path, args.content)
        return ToolOutput(content=f"wrote {args.path} ({len(args.content.splitlines())} lines, {len(args.content)} chars)")


class EditFileArgs(BaseModel):
    """Arguments of edit_file."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace root.")
    old: str = Field(min_length=1, description="Exact text to replace; it must occur exactly once in the file.")
    new: str = Field(description="Replacement text.")


class EditFileTool:
    """Replace one exact occurrence of a string in a workspace file."""

    name = "edit_file"
    description = (
        "Replace an exact string in a workspace file. 'old' must match exactly once "
        "(include surrounding lines to make it unique)."
    )
    Args = EditFileArgs

    def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        """Apply the replacement, or explain why it cannot be applied."""
        text = ctx.workspace.read(args.path)
        count = text.count(args.old)
        if count == 0:
            return ToolOutput(
                content=f"'old' text not found in {args.path}; nothing changed (read the file and copy the text exactly)",
                is_error=True,
            )
        if count > 1:
            return ToolOutput(
                content=f"'old' text occurs {count} times in {args.path}; include more context so it matches once",
                is_error=True,
            )
        ctx.workspace.write(args.path, text.replace(args.old, args.new, 1))
        return ToolOutput(content=f"edited {args.path}: replaced 1 occurrence")


class ListFilesArgs(BaseModel):
    """Arguments of list_files (none)."""

    model_config = ConfigDict(extra="forbid")


class ListFilesTool:
    """List the workspace's files."""

    name = "list_files"
    description = "List every file of the workspace; protected (read-only) files are marked."
    Args = ListFilesArgs

    def run(self, args: ListFilesArgs, ctx: ToolContext) -> ToolOutput:
        """One path per line, '(protected)' after read-only ones."""
        ws = ctx.workspace
        lines = [f"{rel} (protected)" if ws.is_protected(rel) else rel for rel in ws.list()]
        return ToolOutput(content="\n".join(lines) if lines else "(no files)")


@hookimpl
def register_tools(register) -> None:
    """Register the four file tools."""
    for tool in (ReadFileTool, WriteFileTool, EditFileTool, ListFilesTool):
        register(tool.name, tool)
