"""Plain result types: the SDK's view of boxd's messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from .errors import BoxdError, from_code
from .v1 import boxd_pb2, diff_pb2, files_pb2, pool_pb2, process_pb2, registry_pb2

__all__ = [
    "Change",
    "Changes",
    "ExecResult",
    "Output",
    "SandboxInfo",
    "Usage",
    "FileInfo",
    "FileResult",
    "DownloadedFile",
    "ProcessInfo",
    "WatchEvent",
    "SessionInfo",
    "SessionResult",
    "Line",
    "Lines",
    "EditResult",
    "GrepMatch",
    "Image",
    "BuildStep",
    "BuildResult",
    "PublishedPort",
    "NetworkStatus",
    "Pool",
    "BlobProgress",
    "TransferProgress",
    "PathStat",
    "duration",
]


def duration(seconds: Union[float, int, str, None]) -> str:
    """A Go duration for boxd: a number of seconds, or a string passed as is
    ("1h30m")."""
    if seconds is None:
        return ""
    if isinstance(seconds, str):
        return seconds
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {seconds}")
    return f"{int(round(seconds * 1000))}ms"


@dataclass
class Output:
    """A piece of a command's output: stream is "stdout" or "stderr"."""

    stream: str
    data: bytes


@dataclass
class ExecResult:
    """How a command ended, with its output (bytes, exactly as produced)."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    truncated: bool = False
    signal: str = ""
    started_at: str = ""
    ended_at: str = ""
    user_cpu_usec: int = 0
    system_cpu_usec: int = 0
    max_rss_bytes: int = 0
    pid: int = 0
    #: The command died of SIGKILL while the kernel's OOM killer killed a
    #: process of the sandbox (boxd reads the cgroup's counter).
    oom_killed: bool = False
    #: The command's process from the init's fork to its reaping, as the
    #: init measured it: the floor under the call's round trip.
    process_usec: int = 0

    @property
    def stdout_text(self) -> str:
        """stdout as UTF-8; invalid bytes become U+FFFD."""
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @classmethod
    def _from(cls, r: boxd_pb2.ExecResult, stdout: bytes = b"", stderr: bytes = b"") -> "ExecResult":
        return cls(
            exit_code=r.exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=r.timed_out,
            truncated=r.truncated,
            signal=r.signal,
            started_at=r.started_at,
            ended_at=r.ended_at,
            user_cpu_usec=r.user_cpu_usec,
            system_cpu_usec=r.system_cpu_usec,
            max_rss_bytes=r.max_rss_bytes,
            pid=r.pid,
            oom_killed=r.oom_killed,
            process_usec=r.process_usec,
        )


@dataclass
class Usage:
    memory_bytes: int = 0
    memory_peak_bytes: int = 0
    cpu_usec: int = 0
    pids: int = 0
    oom_kills: int = 0


@dataclass
class SandboxStats:
    """One sample of a sandbox's resource use (Sandbox.stats)."""

    id: str
    name: str
    state: str
    memory_limit_bytes: int
    usage: Optional[Usage]
    cpu_percent: float  # over the interval before the sample, % of one core

    @classmethod
    def _from(cls, s: boxd_pb2.SandboxStats) -> "SandboxStats":
        usage = None
        if s.HasField("usage"):
            u = s.usage
            usage = Usage(u.memory_bytes, u.memory_peak_bytes, u.cpu_usec, u.pids, u.oom_kills)
        return cls(s.id, s.name, s.state, s.memory_limit_bytes, usage, s.cpu_percent)


@dataclass
class Event:
    """One entry of boxd's event log (boxd.events)."""

    seq: int
    time: str
    type: str
    sandbox: str
    attrs: Dict[str, str]

    @classmethod
    def _from(cls, e: Any) -> "Event":
        return cls(e.seq, e.time, e.type, e.sandbox, dict(e.attrs))


@dataclass
class SandboxInfo:
    id: str
    name: str
    image: str
    state: str
    memory_bytes: int
    cpus: float
    pids: int
    env: List[str]
    workdir: str
    labels: Dict[str, str]
    created_at: str
    expires_at: str
    init_restarts: int = 0
    restart_refused: str = ""
    usage: Optional[Usage] = None
    ports: List["PublishedPort"] = field(default_factory=list)
    network: Optional["NetworkStatus"] = None

    @classmethod
    def _from(cls, s: boxd_pb2.Sandbox) -> "SandboxInfo":
        usage = None
        if s.HasField("usage"):
            u = s.usage
            usage = Usage(u.memory_bytes, u.memory_peak_bytes, u.cpu_usec, u.pids, u.oom_kills)
        return cls(
            id=s.id,
            name=s.name,
            image=s.image,
            state=s.state,
            memory_bytes=s.memory_bytes,
            cpus=s.cpus,
            pids=s.pids,
            env=list(s.env),
            workdir=s.workdir,
            labels=dict(s.labels),
            created_at=s.created_at,
            expires_at=s.expires_at,
            init_restarts=s.init_restarts,
            restart_refused=s.restart_refused,
            usage=usage,
            ports=[PublishedPort._from(p) for p in s.ports],
            network=NetworkStatus._from(s.network) if s.HasField("network") else None,
        )


_TYPES = {
    files_pb2.FILE_TYPE_REGULAR: "file",
    files_pb2.FILE_TYPE_DIRECTORY: "dir",
    files_pb2.FILE_TYPE_SYMLINK: "symlink",
    files_pb2.FILE_TYPE_FIFO: "fifo",
    files_pb2.FILE_TYPE_SOCKET: "socket",
    files_pb2.FILE_TYPE_CHAR_DEVICE: "char_device",
    files_pb2.FILE_TYPE_BLOCK_DEVICE: "block_device",
}


@dataclass
class FileInfo:
    """A file in a sandbox. type is "file", "dir", "symlink", "fifo",
    "socket", "char_device" or "block_device"; mode the permission bits."""

    path: str
    name: str
    type: str
    size: int
    mode: int
    mtime: str
    link_target: str = ""
    uid: int = 0
    gid: int = 0
    error: str = ""

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @classmethod
    def _from(cls, f: files_pb2.FileInfo) -> "FileInfo":
        return cls(
            path=f.path,
            name=f.name,
            type=_TYPES.get(f.type, "unknown"),
            size=f.size,
            mode=f.mode,
            mtime=f.mtime,
            link_target=f.link_target,
            uid=f.uid,
            gid=f.gid,
            error=f.error,
        )


@dataclass
class FileResult:
    """The outcome of one file of a bulk call: error is None on success,
    else the typed exception (not raised) saying why it failed."""

    index: int
    path: str
    size: int = 0
    error: Optional[BoxdError] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def _from(cls, r: files_pb2.FileResult) -> "FileResult":
        err = from_code(r.error.code, r.error.message) if r.HasField("error") else None
        return cls(index=r.index, path=r.path, size=r.size, error=err)


@dataclass
class DownloadedFile:
    """One file of files.download: data is its content (b"" when error)."""

    index: int
    path: str
    data: bytes = b""
    info: Optional[FileInfo] = None
    error: Optional[BoxdError] = None

    @property
    def ok(self) -> bool:
        return self.error is None


_OPS = {
    files_pb2.WATCH_OP_CREATE: "create",
    files_pb2.WATCH_OP_WRITE: "write",
    files_pb2.WATCH_OP_REMOVE: "remove",
    files_pb2.WATCH_OP_RENAME: "rename",
    files_pb2.WATCH_OP_CHMOD: "chmod",
    files_pb2.WATCH_OP_OVERFLOW: "overflow",
}


@dataclass
class WatchEvent:
    """A change under a watched path. op is "create", "write", "remove",
    "rename" (old_path says from where), "chmod" (metadata) or "overflow"
    (events were lost: rescan if it matters)."""

    path: str
    op: str
    old_path: str = ""
    is_dir: bool = False
    message: str = ""

    @classmethod
    def _from(cls, e: files_pb2.WatchEvent) -> "WatchEvent":
        return cls(e.path, _OPS.get(e.op, "unknown"), e.old_path, e.is_dir, e.message)


@dataclass
class ProcessInfo:
    """A background process. state is "running" or "exited"; result is set
    once it has exited (without output: use attach for that)."""

    id: str
    pid: int
    args: List[str]
    user: str
    tty: bool
    stdin_open: bool
    state: str
    started_at: str
    result: Optional[ExecResult] = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def _from(cls, p: process_pb2.ProcessInfo) -> "ProcessInfo":
        return cls(
            id=p.id,
            pid=p.pid,
            args=list(p.args),
            user=p.user,
            tty=p.tty,
            stdin_open=p.stdin_open,
            state=p.state,
            started_at=p.started_at,
            result=ExecResult._from(p.result) if p.HasField("result") else None,
        )


@dataclass
class SessionInfo:
    name: str
    shell: str
    user: str
    pid: int
    created_at: str
    busy: bool
    commands: int
    restarts: int

    @classmethod
    def _from(cls, s: process_pb2.Session) -> "SessionInfo":
        return cls(s.name, s.shell, s.user, s.pid, s.created_at, s.busy, s.commands, s.restarts)


@dataclass
class SessionResult(ExecResult):
    """A session command's result. session_restarted: the shell was replaced
    after a timeout and its state is lost; session_ended: the shell exited."""

    session_restarted: bool = False
    session_ended: bool = False



@dataclass
class Line:
    """One line of a file: number is 1-based, text has no newline (invalid
    UTF-8 shown as U+FFFD), cut says it was longer than the line limit."""

    number: int
    text: str
    cut: bool = False

    @classmethod
    def _from(cls, l: files_pb2.Line) -> "Line":
        return cls(l.number, l.text, l.cut)


@dataclass
class Lines:
    """Lines of a file from files.read_lines. more: the file goes on (read on
    from next_offset); binary: a NUL byte in its first 8 KiB."""

    lines: List[Line]
    info: Optional[FileInfo] = None
    more: bool = False
    next_offset: int = 0
    binary: bool = False

    def numbered(self) -> str:
        """The lines as ``cat -n`` prints them."""
        return "".join(f"{l.number:6d}\t{l.text}\n" for l in self.lines)

    @property
    def text(self) -> str:
        """The lines joined with newlines (cut lines as they were cut)."""
        return "".join(l.text + "\n" for l in self.lines)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)

    @classmethod
    def _from(cls, r: files_pb2.ReadLinesResponse) -> "Lines":
        return cls([Line._from(l) for l in r.lines], FileInfo._from(r.info) if r.HasField("info") else None,
                   r.more_lines, r.next_offset, r.binary)


@dataclass
class EditResult:
    """What files.edit did: how many replacements, the line where the first
    one starts, and the file as it is now."""

    replacements: int
    line: int
    info: Optional[FileInfo] = None

    @classmethod
    def _from(cls, r: files_pb2.EditFileResponse) -> "EditResult":
        return cls(r.replacements, r.line, FileInfo._from(r.info) if r.HasField("info") else None)


@dataclass
class GrepMatch:
    """A matching line: path (absolute), line number and text; for a binary
    file one match with binary set stands for the file (line 0, no text)."""

    path: str
    line: int = 0
    text: str = ""
    cut: bool = False
    binary: bool = False

    @classmethod
    def _from(cls, m: files_pb2.GrepMatch) -> "GrepMatch":
        if m.binary or not m.HasField("line"):
            return cls(m.path, binary=m.binary)
        return cls(m.path, m.line.number, m.line.text, m.line.cut)


@dataclass
class Image:
    """An image boxd stores: name, digest, size in bytes, creation time and
    the record's labels (boxd's audit of who imported or replaced it)."""

    name: str
    digest: str
    size: int = 0
    created_at: str = ""
    labels: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def _from(cls, i: boxd_pb2.Image) -> "Image":
        return cls(i.name, i.digest, i.size, i.created_at, dict(i.labels))


@dataclass
class BuildStep:
    """One Dockerfile step of a build: its line, the instruction as written,
    whether it came from the step cache, and how long it took."""

    line: int
    instruction: str
    cached: bool = False
    duration_ms: int = 0


@dataclass
class BuildResult:
    """What images.build made: the image and the steps that made it."""

    image: Image
    steps: List[BuildStep]

    @classmethod
    def _from(cls, r: boxd_pb2.BuildImageResponse) -> "BuildResult":
        return cls(Image._from(r.image),
                   [BuildStep(s.line, s.instruction, s.cached, s.duration_ms) for s in r.steps])


@dataclass
class PublishedPort:
    """A sandbox port reachable from the host at host_ip:host_port."""

    host_ip: str
    host_port: int
    port: int
    protocol: str = "tcp"

    @classmethod
    def _from(cls, p: boxd_pb2.PublishedPort) -> "PublishedPort":
        return cls(p.host_ip, p.host_port, p.port, p.protocol or "tcp")


@dataclass
class NetworkStatus:
    """A sandbox's network: mode ("none" or "egress"), the canonical allow
    entries, its address, gateway and resolver on boxd's bridge."""

    mode: str
    allow: List[str] = field(default_factory=list)
    address: str = ""
    gateway: str = ""
    dns: str = ""

    @classmethod
    def _from(cls, n: boxd_pb2.NetworkStatus) -> "NetworkStatus":
        return cls(n.mode, list(n.allow), n.address, n.gateway, n.dns)


@dataclass
class Pool:
    """An image's warm pool: target size, ready and starting members, and
    the members' runtime ("runc" or "gvisor")."""

    image: str
    size: int
    ready: int = 0
    starting: int = 0
    runtime: str = ""

    @classmethod
    def _from(cls, p: pool_pb2.Pool) -> "Pool":
        return cls(p.image, p.size, p.ready, p.starting, p.runtime)


@dataclass
class BlobProgress:
    """One blob of a pull or push: digest, kind (index, manifest, config,
    layer), size, bytes moved so far and its status."""

    digest: str
    kind: str
    size: int
    done: int
    status: str


@dataclass
class TransferProgress:
    """How far a pull or push has come: the phase and every blob seen."""

    phase: str
    blobs: List[BlobProgress]

    @classmethod
    def _from(cls, p: registry_pb2.TransferProgress) -> "TransferProgress":
        return cls(p.phase, [BlobProgress(b.digest, b.kind, b.size, b.done, b.status) for b in p.blobs])


@dataclass
class PathStat:
    """A path as sb.stat_path sees it (the stat behind copy_in/copy_out)."""

    name: str
    size: int
    mode: int
    is_dir: bool
    mtime: str = ""
    link_target: str = ""

    @classmethod
    def _from(cls, r: boxd_pb2.StatPathResponse) -> "PathStat":
        return cls(r.name, r.size, r.mode, r.is_dir, r.mtime, r.link_target)


_CHANGE_KINDS = {diff_pb2.DIFF_CHANGE_ADDED: "added", diff_pb2.DIFF_CHANGE_MODIFIED: "modified",
                 diff_pb2.DIFF_CHANGE_DELETED: "deleted"}


@dataclass
class Change:
    """One path changed in a sandbox's writable layer (Sandbox.diff):
    its new state, or its old one when it was deleted."""

    path: str  # a byte that is not UTF-8 shows as U+FFFD; raw_path has the bytes
    change: str  # "added", "modified" or "deleted"
    type: str  # "file", "dir", "symlink", "fifo", "socket", "char", "block"
    size: int
    mode: int
    uid: int
    gid: int
    link_target: str = ""
    patch: str = ""  # with patch=True: the unified diff of a text file
    binary: bool = False  # not text: no patch
    patch_truncated: bool = False  # over 1 MiB, or 16 MiB of patches in all
    raw_path: bytes = b""

    @classmethod
    def _from(cls, e: diff_pb2.DiffEntry) -> "Change":
        types = {files_pb2.FILE_TYPE_REGULAR: "file", files_pb2.FILE_TYPE_DIRECTORY: "dir",
                 files_pb2.FILE_TYPE_SYMLINK: "symlink", files_pb2.FILE_TYPE_FIFO: "fifo",
                 files_pb2.FILE_TYPE_SOCKET: "socket", files_pb2.FILE_TYPE_CHAR_DEVICE: "char",
                 files_pb2.FILE_TYPE_BLOCK_DEVICE: "block"}
        return cls(e.path, _CHANGE_KINDS.get(e.change, "unknown"), types.get(e.type, "unknown"), e.size, e.mode,
                   e.uid, e.gid, e.link_target, e.patch, e.binary, e.patch_truncated,
                   e.raw_path or e.path.encode())


@dataclass
class Changes:
    """What Sandbox.diff found, in path order."""

    entries: List[Change] = field(default_factory=list)
    truncated: bool = False  # the listing stopped at 100,000 changes
    patch_truncated: bool = False  # some patch was cut or left out

    def _add(self, msg: diff_pb2.DiffSandboxResponse) -> bool:
        self.entries.extend(Change._from(e) for e in msg.entries)
        self.truncated, self.patch_truncated = msg.truncated, msg.patch_truncated
        return msg.done
