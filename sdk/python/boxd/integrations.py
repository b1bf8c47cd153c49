"""Backends for agent frameworks, built on boxd's server-side file helpers.

``BoxdSandbox`` has the method set and result shapes of a
deepagents Docker sandbox backend (``execute`` with exit 124 on timeout,
``upload_files``/``download_files`` with per-file errors) and of the file
operations such a backend provides (``ls_info``, ``read`` with line
ranges, ``write``, ``edit`` by exact replacement, ``glob_info``,
``grep_raw``). Where that backend's base class runs shell pipelines through
``execute`` for each of those, here each is one call that boxd's init does
inside the sandbox, so a file name or content never passes through a
shell.

If the ``deepagents`` package is importable, its result classes
(ExecuteResponse, FileUploadResponse, ...) are used; otherwise look-alike
dataclasses with the same fields::

    from boxd.integrations import BoxdSandbox
    with BoxdSandbox(memory="1g") as sb:
        r = sb.execute("python3 -c 'print(6*7)'", timeout=10)   # r.output, r.exit_code, r.truncated
        sb.write("/workspace/app.py", "print('hi')\\n")
        sb.edit("/workspace/app.py", "'hi'", "'hello'")
        print(sb.read("/workspace/app.py"))                       # numbered like cat -n
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from . import errors
from ._client import Client
from .sandbox import Sandbox

__all__ = [
    "BoxdSandbox",
    "ExecuteResponse",
    "FileUploadResponse",
    "FileDownloadResponse",
    "WriteResult",
    "EditResult",
    "TIMEOUT_EXIT_CODE",
]

TIMEOUT_EXIT_CODE = 124
"""The exit code execute reports for a command that ran out of time, as
timeout(1) does."""

try:  # the framework's own result types, when it is installed
    from deepagents.backends.protocol import (  # type: ignore[import-not-found]
        EditResult,
        ExecuteResponse,
        FileDownloadResponse,
        FileUploadResponse,
        WriteResult,
    )
except ImportError:  # look-alikes with the same fields

    @dataclass
    class ExecuteResponse:  # type: ignore[no-redef]
        """A command's combined output (stdout then stderr), exit code, and
        whether the output was cut at the limit."""

        output: str
        exit_code: Optional[int] = None
        truncated: bool = False

    @dataclass
    class FileUploadResponse:  # type: ignore[no-redef]
        path: str
        error: Optional[str] = None

    @dataclass
    class FileDownloadResponse:  # type: ignore[no-redef]
        path: str
        content: Optional[bytes] = None
        error: Optional[str] = None

    @dataclass
    class WriteResult:  # type: ignore[no-redef]
        error: Optional[str] = None
        path: Optional[str] = None
        files_update: Optional[Dict[str, Any]] = None

    @dataclass
    class EditResult:  # type: ignore[no-redef]
        error: Optional[str] = None
        path: Optional[str] = None
        files_update: Optional[Dict[str, Any]] = None
        occurrences: Optional[int] = None


def _file_error(e: errors.BoxdError) -> str:
    """A per-file error as the framework names them."""
    if isinstance(e, errors.NotFound):
        return "file_not_found"
    if isinstance(e, errors.PermissionDenied):
        return "permission_denied"
    if isinstance(e, errors.FailedPrecondition) and "is a directory" in e.message:
        return "is_directory"
    if isinstance(e, errors.InvalidArgument):
        return "invalid_path"
    return str(e)


class BoxdSandbox:
    """A deepagents-style sandbox backend, on boxd.

    Pass ``sandbox_id`` to reattach to an existing sandbox (by id or name),
    or create settings for a new one. ``close()`` (or leaving a with block)
    deletes a sandbox this object created; one it reattached to is kept
    unless ``close(delete=True)``.
    """

    def __init__(self, sandbox_id: Optional[str] = None, *, image: Optional[str] = None,
                 memory: Union[str, int, None] = "1g", cpus: Optional[float] = None, pids: Optional[int] = 256,
                 environment: Optional[Dict[str, str]] = None, default_timeout: int = 300,
                 workdir: str = "/workspace", ttl: Union[float, str, None] = "2h", max_output_bytes: int = 0,
                 labels: Optional[Dict[str, str]] = None, client: Optional[Client] = None) -> None:
        self._default_timeout = default_timeout
        self._workdir = workdir
        self._max_output = max_output_bytes
        if sandbox_id:
            self._sb = Sandbox.connect(sandbox_id, client=client)
            self._owned = False
        else:
            self._sb = Sandbox.create(image=image, memory=memory, cpus=cpus, pids=pids, env=environment,
                                      workdir=workdir, ttl=ttl,
                                      labels={"boxd-agent-sandbox": "true", **(labels or {})}, client=client)
            self._owned = True

    @property
    def id(self) -> str:
        return self._sb.id

    @property
    def sandbox(self) -> Sandbox:
        """The underlying boxd.Sandbox, for everything else."""
        return self._sb

    def __enter__(self) -> "BoxdSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, delete: Optional[bool] = None) -> None:
        """Deletes the sandbox if this object created it (or delete=True)."""
        if delete if delete is not None else self._owned:
            try:
                self._sb.delete()
            except errors.NotFound:
                pass

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{self._workdir.rstrip('/')}/{path}"

    # -- commands --------------------------------------------------------------

    def execute(self, command: str, *, timeout: Optional[int] = None) -> ExecuteResponse:
        """Runs a shell command in the workdir: output is stdout then stderr
        (UTF-8, invalid bytes replaced). A timeout (default_timeout seconds
        unless given; 0 for none) kills the command's whole process tree and
        gives exit code 124 with a [TIMEOUT] note."""
        t = self._default_timeout if timeout is None else timeout
        r = self._sb.exec(["sh", "-c", command], timeout=t if t and t > 0 else None, workdir=self._workdir,
                          output_limit=self._max_output)
        output = (r.stdout + r.stderr).decode("utf-8", errors="replace")
        exit_code = r.exit_code
        if r.timed_out:
            exit_code = TIMEOUT_EXIT_CODE
            output += f"\n[TIMEOUT] Command timed out after {t}s"
        return ExecuteResponse(output=output, exit_code=exit_code, truncated=r.truncated)

    # -- many files, with per-file errors ----------------------------------------

    def upload_files(self, files: List[Tuple[str, bytes]]) -> List[FileUploadResponse]:
        """Writes each (path, content), creating parent directories; a file
        that fails has its error in its response, the others are written."""
        if not files:
            return []
        res = self._sb.files.upload([(self._abs(p), c) for p, c in files], parents=True)
        return [FileUploadResponse(path=p, error=_file_error(r.error) if r.error else None)
                for (p, _), r in zip(files, res)]

    def download_files(self, paths: List[str]) -> List[FileDownloadResponse]:
        """Reads each path; a file that fails has its error in its response."""
        if not paths:
            return []
        got = self._sb.files.download([self._abs(p) for p in paths])
        return [FileDownloadResponse(path=p, content=None if f.error else f.data,
                                     error=_file_error(f.error) if f.error else None)
                for p, f in zip(paths, got)]

    # -- the file tools --------------------------------------------------------

    def ls_info(self, path: str) -> List[Dict[str, Any]]:
        """The entries of a directory: path (directories end in "/"), is_dir,
        size, modified_at."""
        try:
            entries = self._sb.files.list(self._abs(path))
        except errors.BoxdError:
            return []
        base = self._abs(path).rstrip("/")
        return [{"path": f"{base}/{e.path}" + ("/" if e.is_dir else ""), "is_dir": e.is_dir, "size": e.size,
                 "modified_at": e.mtime} for e in entries]

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> str:
        """Lines offset+1 to offset+limit, numbered like cat -n, or an
        error message."""
        try:
            lines = self._sb.files.read_lines(self._abs(file_path), offset=offset, limit=limit)
        except errors.NotFound:
            return f"Error: File '{file_path}' not found"
        except errors.BoxdError as e:
            return f"Error: {e.message}"
        if not lines.lines:
            if offset == 0:
                return "System reminder: File exists but has empty contents"
            return f"Error: Line offset {offset} exceeds file length"
        return lines.numbered().rstrip("\n")

    def write(self, file_path: str, content: str) -> WriteResult:
        """Creates a new file (parents too); an existing one is an error:
        read it and edit it instead."""
        try:
            self._sb.files.write(self._abs(file_path), content, parents=True, exclusive=True)
        except errors.AlreadyExists:
            return WriteResult(error=f"Cannot write to {file_path} because it already exists. "
                                     "Read and then make an edit, or write to a new path.")
        except errors.BoxdError as e:
            return WriteResult(error=f"Error writing file '{file_path}': {e.message}")
        return WriteResult(path=file_path, files_update=None)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        """Replaces old_string (exactly once, or every occurrence with
        replace_all) in the file, atomically, on the server."""
        try:
            r = self._sb.files.edit(self._abs(file_path), old_string, new_string, replace_all=replace_all)
        except errors.NotFound:
            return EditResult(error=f"Error: File '{file_path}' not found")
        except errors.FailedPrecondition as e:
            m = re.search(r"occurs (\d+) times", e.message)
            if m:
                return EditResult(error=f"Error: String '{old_string}' appears {m.group(1)} times in file. "
                                        "Use replace_all=True to replace all instances, or provide a more "
                                        "specific string with surrounding context.")
            if "does not occur" in e.message:
                return EditResult(error=f"Error: String not found in file: '{old_string}'")
            return EditResult(error=f"Error editing file '{file_path}': {e.message}")
        except errors.BoxdError as e:
            return EditResult(error=f"Error editing file '{file_path}': {e.message}")
        return EditResult(path=file_path, files_update=None, occurrences=r.replacements)

    def grep_raw(self, pattern: str, path: Optional[str] = None,
                 glob: Optional[str] = None) -> Union[List[Dict[str, Any]], str]:
        """Lines containing pattern (plain text) below path (default the
        workdir), only in files matching glob: [{path, line, text}], or an
        error message. Binary files are left out."""
        try:
            found = self._sb.files.grep(pattern, self._abs(path) if path else self._workdir, glob=glob, literal=True)
        except errors.BoxdError as e:
            return f"Error: {e.message}"
        return [{"path": m.path, "line": m.line, "text": m.text} for m in found if not m.binary]

    def glob_info(self, pattern: str, path: str = "/") -> List[Dict[str, Any]]:
        """The paths matching pattern below path, like ls_info."""
        try:
            found = self._sb.files.glob(pattern, path=self._abs(path))
        except errors.BoxdError:
            return []
        return [{"path": f.path + ("/" if f.is_dir else ""), "is_dir": f.is_dir, "size": f.size,
                 "modified_at": f.mtime} for f in found]
