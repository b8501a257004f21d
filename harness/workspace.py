"""A confined workspace and its content-addressed snapshot store.

:class:`ConfinedWorkspace` implements :class:`cuda_agent.protocols.Workspace`:
every path the agent names is resolved inside ``root`` (``..``, absolute
paths and symlinks pointing out are refused), protected files refuse writes
and are re-hashed on demand, and :meth:`ConfinedWorkspace.snapshot` stores
the whole state content-addressed so any candidate can be rebuilt later.

Store layout (``<root>/../.snapshots`` unless ``store`` is given)::

    blobs/<sha256 of content>            file contents, written once
    manifests/<sha256 of manifest>.json  {"files": {rel: blob}, "protected": {rel: hash}}

A snapshot id is ``sha256:<hex of the manifest>``: equal states give equal ids.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from cuda_agent.errors import WorkspaceError

#: Folder names never listed nor snapshotted (interpreter caches, VCS data).
IGNORED_DIRS = frozenset({"__pycache__", ".git", ".pytest_cache"})
#: Marker hash for a protected path that did not exist when it was protected.
ABSENT = "absent"


def content_hash(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ConfinedWorkspace:
    """A folder the agent edits; nothing it names may resolve outside ``root``.

    :param root: the workspace folder (created if missing).
    :param protected: relative paths to protect now (their current hash is
        recorded), or a mapping ``rel -> "sha256:..."`` of expected hashes.
    :param store: snapshot store folder; default ``<root>/../.snapshots``.
    """

    def __init__(
        self,
        root: Path | str,
        protected: Mapping[str, str] | Iterable[str] = (),
        store: Path | str | None = None,
    ) -> None:
        self.root = Path(root).absolute()
        self.root.mkdir(parents=True, exist_ok=True)
        self._real_root = self.root.resolve()
        self.store = Path(store).absolute() if store is not None else self.root.parent / ".snapshots"
        self._protected: dict[str, str] = {}
        if isinstance(protected, Mapping):
            for rel, digest in protected.items():
                self._protected[self._relative(rel)] = digest
        else:
            for rel in protected:
                self.protect(rel)

    def __repr__(self) -> str:
        return f"ConfinedWorkspace({str(self.root)!r}, protected={sorted(self._protected)})"

    # -- paths ---------------------------------------------------------------
    def resolve(self, rel: str) -> Path:
        """Absolute path of ``rel`` inside the workspace.

        :raises WorkspaceError: ``rel`` is empty, absolute, climbs out with
            ``..``, or passes through a symlink that points outside ``root``.
        """
        if not isinstance(rel, str) or not rel.strip():
            raise WorkspaceError(f"empty path; give a path relative to the workspace, e.g. 'kernels/relu.cu'")
        if "\x00" in rel:
            raise WorkspaceError(f"path {rel!r} contains a NUL byte")
        pure = PurePosixPath(rel.replace("\\", "/"))
        if pure.is_absolute() or rel.startswith("~"):
            raise WorkspaceError(
                f"path {rel!r} is absolute; paths are relative to the workspace root (e.g. 'model_new.py')"
            )
        if ".." in pure.parts:
            raise WorkspaceError(f"path {rel!r} contains '..'; paths must stay inside the workspace")
        candidate = self.root.joinpath(*pure.parts)
        real = candidate.resolve()
        if real != self._real_root and self._real_root not in real.parents:
            raise WorkspaceError(
                f"path {rel!r} resolves outside the workspace (through a symlink to {real}); refused"
            )
        return candidate

    def _relative(self, rel: str) -> str:
        """Canonical relative form of ``rel`` (symlinks inside the workspace followed)."""
        real = self.resolve(rel).resolve()
        if real == self._real_root:
            raise WorkspaceError(f"path {rel!r} is the workspace root, not a file")
        return real.relative_to(self._real_root).as_posix()

    # -- files ---------------------------------------------------------------
    def read(self, rel: str) -> str:
        """Text of file ``rel`` (UTF-8, undecodable bytes replaced)."""
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"{rel!r} is a folder, not a file; files here: {', '.join(self.list()) or '(none)'}")
        if not path.is_file():
            raise WorkspaceError(f"no file {rel!r} in the workspace; files: {', '.join(self.list()) or '(none)'}")
        return path.read_text(encoding="utf-8", errors="replace")

    def write(self, rel: str, text: str) -> None:
        """Write ``text`` to ``rel`` (parents created); protected files and escapes are refused."""
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"{rel!r} is a folder; give a file path")
        if self.is_protected(rel):
            raise WorkspaceError(
                f"{rel!r} is protected (harness-owned, read-only); write your code in other files, "
                f"e.g. model_new.py and kernels/*"
            )
        _atomic_write(path, text.encode("utf-8"))

    def list(self) -> list[str]:
        """Relative paths of all files (symlinks to files inside included), sorted."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS)
            for name in filenames:
                path = Path(dirpath) / name
                rel = path.relative_to(self.root).as_posix()
                try:
                    self.resolve(rel)
                except WorkspaceError:
                    continue  # a symlink pointing out: not part of the workspace
                if path.is_file():
                    out.append(rel)
        return sorted(out)

    # -- protection ------------------------------------------------------------
    def is_protected(self, rel: str) -> bool:
        """Whether ``rel`` (after following symlinks inside the workspace) is protected."""
        try:
            canonical = self._relative(rel)
        except WorkspaceError:
            return False
        lexical = PurePosixPath(rel.replace("\\", "/")).as_posix()
        return canonical in self._protected or lexical in self._protected

    def protect(self, rel: str) -> None:
        """Protect ``rel``, recording its current hash (or its absence)."""
        canonical = self._relative(rel)
        path = self._real_root / canonical
        self._protected[canonical] = content_hash(path.read_bytes()) if path.is_file() else ABSENT

    @property
    def protected(self) -> dict[str, str]:
        """Protected relative path -> recorded hash (a copy)."""
        return dict(self._protected)

    def verify_protected(self) -> list[str]:
        """Relative paths of protected files whose content changed (empty = intact)."""
        changed = []
        for rel, digest in sorted(self._protected.items()):
            path = self.root / rel
            now = content_hash(path.read_bytes()) if path.is_file() and not path.is_symlink() else ABSENT
            if path.is_symlink():
                now = "symlink"
            if now != digest:
                changed.append(rel)
        return changed

    # -- snapshots -------------------------------------------------------------
    def snapshot(self) -> str:
        """Store the current state content-addressed; return ``sha256:<hex>``."""
        files: dict[str, str] = {}
        blobs = self.store / "blobs"
        for rel in self.list():
            data = (self.root / rel).read_bytes()
            digest = content_hash(data)
            blob = blobs / digest.split(":", 1)[1]
            if not blob.exists():
                _atomic_write(blob, data)
            files[rel] = digest
        manifest = json.dumps({"files": files, "protected": self._protected}, sort_keys=True).encode()
        snap_id = content_hash(manifest)
        target = self.store / "manifests" / (snap_id.split(":", 1)[1] + ".json")
        if not target.exists():
            _atomic_write(target, manifest)
        return snap_id

    @classmethod
    def restore(cls, snapshot_id: str, store: Path | str, dest: Path | str) -> ConfinedWorkspace:
        """Rebuild snapshot ``snapshot_id`` from ``store`` into the empty folder ``dest``."""
        store, dest = Path(store), Path(dest)
        manifest = read_manifest(snapshot_id, store)
        if dest.exists() and any(dest.iterdir()):
            raise WorkspaceError(f"restore target {dest} is not empty; give a fresh folder")
        dest.mkdir(parents=True, exist_ok=True)
        for rel, digest in manifest["files"].items():
            blob = store / "blobs" / digest.split(":", 1)[1]
            if not blob.is_file():
                raise WorkspaceError(f"snapshot {snapshot_id}: blob {digest} of {rel!r} missing from {store}")
            path = dest.joinpath(*PurePosixPath(rel).parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(blob.read_bytes())
        return cls(dest, protected=manifest["protected"], store=store)


def read_manifest(snapshot_id: str, store: Path | str) -> dict:
    """The stored manifest ``{"files": {rel: hash}, "protected": {rel: hash}}`` of a snapshot."""
    if not isinstance(snapshot_id, str) or not snapshot_id.startswith("sha256:"):
        raise WorkspaceError(f"invalid snapshot id {snapshot_id!r}; expected 'sha256:<hex>'")
    path = Path(store) / "manifests" / (snapshot_id.split(":", 1)[1] + ".json")
    if not path.is_file():
        raise WorkspaceError(f"snapshot {snapshot_id} not found in store {store}")
    data = path.read_bytes()
    if content_hash(data) != snapshot_id:
        raise WorkspaceError(f"snapshot {snapshot_id} in {store} is corrupt (hash mismatch)")
    return json.loads(data)
