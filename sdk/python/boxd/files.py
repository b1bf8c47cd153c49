"""Files inside a sandbox (``sb.files``), over boxd's FileService.

File data travels as binary protobuf in 1 MiB messages, never as JSON or
base64. Reads (read, read_into, read_stream, download) go over HTTP/1.1 in
the Connect protocol (boxd/_http1.py says why), everything else over gRPC.
Paths are the sandbox's: relative ones start at its workdir.
"""

from __future__ import annotations

import io
from typing import IO, TYPE_CHECKING, Any, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _wire
from ._client import CHUNK
from .types import DownloadedFile, EditResult, FileInfo, FileResult, GrepMatch, Lines, WatchEvent
from .errors import from_code
from .v1 import files_pb2

if TYPE_CHECKING:
    from .sandbox import Sandbox

Data = Union[bytes, bytearray, memoryview, str, IO[bytes], Iterable[bytes]]
UploadItem = Union[Tuple[str, Data], Tuple[str, Data, int]]

# The file-data responses, the data field read as a view (see _wire).
_READ_SPLIT = _wire.splitter(files_pb2.ReadFileResponse, files_pb2.ReadFileResponse.DESCRIPTOR.fields_by_name["data"].number)
_DOWNLOAD_SPLIT = _wire.splitter(files_pb2.DownloadFilesResponse,
                                 files_pb2.DownloadFilesResponse.DESCRIPTOR.fields_by_name["data"].number)

# Field numbers of the data fields: WriteFileRequest.data, UploadFilesRequest.data.
_WRITE_DATA = files_pb2.WriteFileRequest.DESCRIPTOR.fields_by_name["data"].number
_UPLOAD_DATA = files_pb2.UploadFilesRequest.DESCRIPTOR.fields_by_name["data"].number


def _chunks(data: Data) -> Iterator[Union[bytes, memoryview]]:
    """Pieces of at most CHUNK bytes of bytes (views, not copies), a str
    (UTF-8), a binary file object or an iterable of bytes."""
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data).cast("B")
        for i in range(0, len(mv), CHUNK):
            yield mv[i:i + CHUNK]
        return
    read = getattr(data, "read", None)
    if read is not None:
        while True:
            b = read(CHUNK)
            if not b:
                return
            yield b
    for b in data:  # type: ignore[union-attr]
        mv = memoryview(b).cast("B")
        for i in range(0, len(mv), CHUNK):
            yield mv[i:i + CHUNK]


class UploadResult(List[FileResult]):
    """One FileResult per file, in order; falsy .ok if any failed."""

    files_written: int = 0
    bytes_written: int = 0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self)

    @property
    def failed(self) -> List[FileResult]:
        return [r for r in self if not r.ok]


class SearchResult(List[Any]):
    """The matches of files.glob (FileInfo) or files.grep (GrepMatch), in
    the order found; truncated says the search stopped early (a limit or
    boxd's budget for one call) and truncated_reason why."""

    truncated: bool = False
    truncated_reason: str = ""


def _search_result(items: Iterable[Any], r: Any) -> SearchResult:
    out = SearchResult(items)
    out.truncated, out.truncated_reason = r.truncated, r.truncated_reason
    return out


class Watch:
    """Changes under a path, from files.watch(): iterate for WatchEvents;
    close() (or leaving the with block) ends the watch. The watch is in
    place when files.watch() returns."""

    def __init__(self, stream, socket: str) -> None:  # type: ignore[no-untyped-def]
        self._stream = stream
        self._it = iter(stream)
        first = next(self._it, None)
        if first is None or not first.ready:
            stream.close()
            raise from_code("internal", "the watch ended before it was in place")
        self._pending = [WatchEvent._from(e) for e in first.events]

    def __iter__(self) -> Iterator[WatchEvent]:
        while self._pending:
            yield self._pending.pop(0)
        for msg in self._it:
            for e in msg.events:
                yield WatchEvent._from(e)

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Files:
    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    @property
    def _c(self):  # type: ignore[no-untyped-def]
        return self._sb._client

    # -- whole files ---------------------------------------------------------

    def write(self, path: str, data: Data, *, mode: Optional[int] = None, parents: bool = False,
              in_place: bool = False, append: bool = False, exclusive: bool = False,
              user: Optional[str] = None, request_timeout: Optional[float] = None) -> FileInfo:
        """Writes a file: an atomic replace unless in_place/append. data is
        bytes, str (UTF-8), a binary file object or an iterable of bytes
        (streamed, so memory stays bounded). mode is applied exactly
        (e.g. 0o755); absent, a new file gets 0644 and a replaced one keeps
        its mode. parents creates missing directories."""
        first = files_pb2.WriteFileRequest(sandbox_id=self._sb.id, path=path, user=user or "", parents=parents,
                                           in_place=in_place, append=append, exclusive=exclusive)
        if mode is not None:
            first.mode = mode

        def requests() -> Iterator[files_pb2.WriteFileRequest]:
            it = _chunks(data)
            first.data = bytes(next(it, b""))
            yield first
            for c in it:
                yield _wire.data_message(_WRITE_DATA, c)  # type: ignore[misc]

        r = self._c.unary(self._c.files.WriteFile, requests(), request_timeout)
        return FileInfo._from(r.info)

    def write_text(self, path: str, text: str, encoding: str = "utf-8", **kw) -> FileInfo:  # type: ignore[no-untyped-def]
        return self.write(path, text.encode(encoding), **kw)

    def _views(self, path: str, offset: int, length: int, user: Optional[str], no_follow: bool,
               request_timeout: Optional[float]) -> Iterator[memoryview]:
        req = files_pb2.ReadFileRequest(sandbox_id=self._sb.id, path=path, user=user or "", offset=offset,
                                        length=length, no_follow=no_follow)
        # Over HTTP/1.1 (see boxd/_http1.py): each view is of the
        # connection's message buffer, valid until the next is asked for.
        for msg in self._c.read_stream("/boxd.v1.FileService/ReadFile", req, _READ_SPLIT, request_timeout):
            if msg.data is not None and len(msg.data):
                yield msg.data

    def read_stream(self, path: str, *, offset: int = 0, length: int = 0, user: Optional[str] = None,
                    no_follow: bool = False, request_timeout: Optional[float] = None) -> Iterator[bytes]:
        """The file's bytes in pieces, as they arrive (memory stays bounded)."""
        for v in self._views(path, offset, length, user, no_follow, request_timeout):
            yield bytes(v)

    def read(self, path: str, *, offset: int = 0, length: int = 0, user: Optional[str] = None,
             no_follow: bool = False, request_timeout: Optional[float] = None) -> bytes:
        """The file's content (or length bytes from offset; 0: to the end)."""
        # Each received message is copied out of the connection's buffer
        # (which is reused for the next), and BytesIO hands over its buffer
        # without another copy: only the result is new memory.
        buf = io.BytesIO()
        for v in self._views(path, offset, length, user, no_follow, request_timeout):
            buf.write(v)
        return buf.getvalue()

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict", **kw) -> str:  # type: ignore[no-untyped-def]
        return self.read(path, **kw).decode(encoding, errors)

    def read_into(self, path: str, out: IO[bytes], *, offset: int = 0, length: int = 0, user: Optional[str] = None,
                  no_follow: bool = False, request_timeout: Optional[float] = None) -> int:
        """Streams the file into a binary file object; returns the size."""
        n = 0
        for v in self._views(path, offset, length, user, no_follow, request_timeout):
            out.write(v)
            n += len(v)
        return n

    # -- metadata --------------------------------------------------------------

    def stat(self, path: str, *, follow: bool = False, user: Optional[str] = None) -> FileInfo:
        req = files_pb2.StatFileRequest(sandbox_id=self._sb.id, path=path, user=user or "", follow=follow)
        return FileInfo._from(self._c.unary(self._c.files.StatFile, req).info)

    def exists(self, path: str, *, user: Optional[str] = None) -> bool:
        from .errors import NotFound

        try:
            self.stat(path, user=user)
            return True
        except NotFound:
            return False

    def list(self, path: str = ".", *, depth: int = 1, user: Optional[str] = None) -> List[FileInfo]:
        """A directory's entries (paths relative to it), depth first and
        sorted by name; depth < 0 lists everything (at most 64 levels)."""
        req = files_pb2.ListDirRequest(sandbox_id=self._sb.id, path=path, user=user or "", depth=depth)
        out: List[FileInfo] = []
        with self._c.stream(self._c.files.ListDir, req) as s:
            for msg in s:
                out.extend(FileInfo._from(e) for e in msg.entries)
        return out

    def mkdir(self, path: str, *, parents: bool = False, mode: Optional[int] = None,
              user: Optional[str] = None) -> None:
        req = files_pb2.MakeDirRequest(sandbox_id=self._sb.id, path=path, user=user or "", parents=parents)
        if mode is not None:
            req.mode = mode
        self._c.unary(self._c.files.MakeDir, req)

    def rm(self, path: str, *, recursive: bool = False, user: Optional[str] = None) -> None:
        req = files_pb2.RemovePathRequest(sandbox_id=self._sb.id, path=path, user=user or "", recursive=recursive)
        self._c.unary(self._c.files.RemovePath, req)

    def mv(self, src: str, dst: str, *, no_overwrite: bool = False, user: Optional[str] = None) -> None:
        req = files_pb2.RenamePathRequest(sandbox_id=self._sb.id, src=src, dst=dst, user=user or "",
                                          no_overwrite=no_overwrite)
        self._c.unary(self._c.files.RenamePath, req)

    def chmod(self, path: str, mode: int, *, user: Optional[str] = None) -> None:
        req = files_pb2.ChmodPathRequest(sandbox_id=self._sb.id, path=path, user=user or "", mode=mode)
        self._c.unary(self._c.files.ChmodPath, req)

    # -- agent helpers: done inside the sandbox, only the answer comes back ----

    def read_lines(self, path: str, *, offset: int = 0, limit: int = 0, max_line_bytes: int = 0,
                   user: Optional[str] = None) -> Lines:
        """Lines of a text file from line offset+1 (at most limit, default
        2000), numbered: .numbered() prints them like ``cat -n``. Long lines
        are cut at max_line_bytes (default 4096); .more and .next_offset
        say where to read on."""
        return Lines._from(self._c.unary(self._c.files.ReadLines, _read_lines_request(
            self._sb.id, path, offset, limit, max_line_bytes, user)))

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False,
             user: Optional[str] = None) -> EditResult:
        """Replaces the exact text old by new: old must occur exactly once
        (FailedPrecondition if it is missing or repeated: nothing changes)
        unless replace_all. The file is rewritten atomically, keeping its
        owner and mode."""
        return EditResult._from(self._c.unary(self._c.files.EditFile, files_pb2.EditFileRequest(
            sandbox_id=self._sb.id, path=path, user=user or "", old_string=old, new_string=new,
            replace_all=replace_all)))

    def glob(self, pattern: str, *, path: Optional[str] = None, limit: int = 0,
             user: Optional[str] = None) -> SearchResult:
        """FileInfos of the paths matching pattern ("*", "?", "[...]" in a
        name, "**" for any directories), relative to path (default: the
        workdir) unless absolute. Symlinks below are listed, never entered."""
        r = self._c.unary(self._c.files.Glob, files_pb2.GlobRequest(
            sandbox_id=self._sb.id, pattern=pattern, path=path or "", user=user or "", limit=limit))
        return _search_result((FileInfo._from(m) for m in r.matches), r)

    def grep(self, pattern: str, path: Optional[str] = None, *, glob: Optional[str] = None,
             ignore_case: bool = False, literal: bool = False, limit: int = 0, max_line_bytes: int = 0,
             user: Optional[str] = None) -> SearchResult:
        """GrepMatches of the lines matching pattern (RE2 syntax; literal for
        plain text) in a file or below a directory (default: the workdir),
        only in files whose name (or relative path, with "/") matches glob."""
        r = self._c.unary(self._c.files.Grep, _grep_request(self._sb.id, pattern, path, glob, ignore_case, literal,
                                                             limit, max_line_bytes, user))
        return _search_result((GrepMatch._from(m) for m in r.matches), r)

    def chown(self, path: str, owner: str, *, recursive: bool = False, user: Optional[str] = None) -> None:
        """Sets the owner: "USER", "USER:GROUP", "USER:" (the user's login
        group) or ":GROUP", names or ids of the sandbox. A final symlink is
        refused; recursive never follows symlinks in the tree."""
        self._c.unary(self._c.files.ChownPath, files_pb2.ChownPathRequest(
            sandbox_id=self._sb.id, path=path, owner=owner, user=user or "", recursive=recursive))

    def watch(self, path: str, *, recursive: bool = False, user: Optional[str] = None,
              request_timeout: Optional[float] = None) -> Watch:
        """Watches a directory (or one file) for changes until closed or the
        path goes away; recursive watches the directories below too (at most
        8192)."""
        req = files_pb2.WatchPathRequest(sandbox_id=self._sb.id, path=path, user=user or "", recursive=recursive)
        return Watch(self._c.stream(self._c.files.WatchPath, req, request_timeout), self._c.where)

    # -- many files ----------------------------------------------------------

    def upload(self, files: Union[Mapping[str, Data], Sequence[UploadItem]], *, parents: bool = False,
               user: Optional[str] = None, request_timeout: Optional[float] = None) -> UploadResult:
        """Writes many files in one call: a mapping path -> data, or a list of
        (path, data) or (path, data, mode). A file that fails does not stop
        the others: check each FileResult (or .ok / .failed)."""
        r = self._c.unary(self._c.files.UploadFiles, _upload_requests(self._sb.id, files, user, parents),
                          request_timeout)
        res = UploadResult(FileResult._from(x) for x in r.results)
        res.files_written, res.bytes_written = r.files_written, r.bytes_written
        return res

    def download(self, paths: Sequence[str], *, user: Optional[str] = None, no_follow: bool = False,
                 request_timeout: Optional[float] = None) -> List[DownloadedFile]:
        """Reads many files in one call; one DownloadedFile per path, in
        order, each with its data or its error."""
        req = files_pb2.DownloadFilesRequest(sandbox_id=self._sb.id, paths=list(paths), user=user or "",
                                             no_follow=no_follow)
        out = [DownloadedFile(index=i, path=p) for i, p in enumerate(paths)]
        parts = [io.BytesIO() for _ in paths]
        for msg in self._c.read_stream("/boxd.v1.FileService/DownloadFiles", req, _DOWNLOAD_SPLIT, request_timeout):
            rest = msg.rest
            i = rest.index if rest is not None else 0
            if not 0 <= i < len(out):
                continue
            if msg.data is not None:
                parts[i].write(msg.data)
                continue
            kind = rest.WhichOneof("event") if rest is not None else None
            if kind == "start":
                out[i].info = FileInfo._from(rest.start)
            elif kind == "done" and rest.done.HasField("error"):
                out[i].error = from_code(rest.done.error.code, rest.done.error.message)
        for f, p in zip(out, parts):
            f.data = b"" if f.error else p.getvalue()
        return out


def _upload_requests(sandbox_id: str, files: Union[Mapping[str, Data], Sequence[UploadItem]],
                     user: Optional[str], parents: bool) -> Iterator[files_pb2.UploadFilesRequest]:
    """The request stream of UploadFiles, for the sync and the asyncio
    client alike: each file's header with its first chunk, then its data
    messages; the first message names the sandbox."""
    items: List[Tuple[str, Data, Optional[int]]]
    if isinstance(files, Mapping):
        items = [(p, d, None) for p, d in files.items()]
    else:
        items = [(it[0], it[1], it[2] if len(it) > 2 else None) for it in files]  # type: ignore[misc]
    first = True
    for path, data, mode in items:
        f = files_pb2.UploadFile(path=path)
        if mode is not None:
            f.mode = mode
        it = _chunks(data)
        m = files_pb2.UploadFilesRequest(file=f, data=bytes(next(it, b"")))
        if first:
            m.sandbox_id, m.user, m.parents = sandbox_id, user or "", parents
            first = False
        yield m
        for c in it:
            yield _wire.data_message(_UPLOAD_DATA, c)  # type: ignore[misc]
    if first:  # nothing to upload: still name the sandbox
        yield files_pb2.UploadFilesRequest(sandbox_id=sandbox_id)


def _read_lines_request(sandbox_id: str, path: str, offset: int, limit: int, max_line_bytes: int,
                        user: Optional[str]) -> files_pb2.ReadLinesRequest:
    return files_pb2.ReadLinesRequest(sandbox_id=sandbox_id, path=path, user=user or "", offset=offset,
                                      limit=limit, max_line_bytes=max_line_bytes)


def _grep_request(sandbox_id: str, pattern: str, path: Optional[str], glob: Optional[str], ignore_case: bool,
                  literal: bool, limit: int, max_line_bytes: int, user: Optional[str]) -> files_pb2.GrepRequest:
    return files_pb2.GrepRequest(sandbox_id=sandbox_id, pattern=pattern, path=path or "", glob=glob or "",
                                 user=user or "", limit=limit, ignore_case=ignore_case, literal=literal,
                                 max_line_bytes=max_line_bytes)
