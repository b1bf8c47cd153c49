"""Streaming commands, background processes and sessions."""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import errors
from ._client import CHUNK
from .types import ExecResult, Output, ProcessInfo, SessionInfo, SessionResult, duration
from .v1 import process_pb2

if TYPE_CHECKING:
    from .sandbox import Sandbox

Stdin = Union[bytes, str, Iterable[bytes], None]
OnOutput = Optional[Callable[[bytes], None]]

# PIPE as stdin: the caller writes with Execution.write and ends with
# close_stdin.
PIPE = object()

_END = object()


# The most stdin a streamed command's start message carries. boxd writes
# a start message's stdin over 64 KiB to the command alongside what comes
# after it on the stream (more stdin, or its end), not before.
_INLINE_STDIN = 64 << 10


def split_stdin(stdin: object, inline: int = _INLINE_STDIN) -> "tuple[bytes, object]":
    """The stdin bytes for a command's first message, and the stdin to feed
    after it. Bytes or text over inline go as stdin messages of a CHUNK each
    (boxd takes no message over 8 MiB): an iterable the Execution feeds,
    then EOF."""
    if not isinstance(stdin, (bytes, bytearray, memoryview, str)):
        return b"", stdin
    data = memoryview(stdin.encode() if isinstance(stdin, str) else stdin).cast("B")
    if len(data) <= inline:
        return bytes(data), stdin
    return b"", (data[i:i + CHUNK] for i in range(0, len(data), CHUNK))


def env_list(env: Union[Mapping[str, str], Sequence[str], None]) -> List[str]:
    """K=V strings from a mapping (or a list of K=V strings as given)."""
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    return list(env)


def argv(args: Union[str, Sequence[str]]) -> List[str]:
    """A string is a shell command (run with sh -c); a list is argv."""
    if isinstance(args, str):
        return ["sh", "-c", args]
    out = list(args)
    if not out:
        raise ValueError("args must not be empty")
    return out


class Execution:
    """A running command on a bidirectional stream (ProcessService.Exec or
    Attach).

    Iterate it for Output pieces as they are produced; ``result`` is set
    when the command has ended. write()/close_stdin() feed stdin (with
    stdin=boxd.PIPE), signal() and resize() reach the command while it runs.
    Leaving the with block, or cancel(), ends the call: for a foreground
    command that kills its whole process tree; an attached background
    process keeps running.
    """

    def __init__(self, sandbox: "Sandbox", first: process_pb2.ProcessInput, stdin: object,
                 request_timeout: Optional[float], attach: bool = False) -> None:
        self._client = sandbox._client
        self._q: "queue.Queue[object]" = queue.Queue()
        self._q.put(first)
        self.result: Optional[ExecResult] = None
        self.process: Optional[ProcessInfo] = None
        self._done = False
        method = self._client.process.Attach if attach else self._client.process.Exec
        self._stream = self._client.stream(method, self._requests(), request_timeout)
        self._it = iter(self._stream)
        if attach:
            # The first message describes the process.
            msg = self._next()
            if msg is not None and msg.WhichOneof("event") == "process":
                self.process = ProcessInfo._from(msg.process)
        if stdin is PIPE:
            return
        if isinstance(stdin, (bytes, bytearray, memoryview, str)) or stdin is None:
            if not attach:
                self._q.put(process_pb2.ProcessInput(close_stdin=True))
            return
        # An iterable of bytes: fed from a thread so a slow producer does not
        # hold up the output.
        t = threading.Thread(target=self._feed, args=(stdin,), daemon=True)
        t.start()

    def _feed(self, chunks: Iterable[bytes]) -> None:
        try:
            for c in chunks:
                if self._done:
                    return
                self.write(c)
        finally:
            if not self._done:
                self.close_stdin()

    def _requests(self) -> Iterator[process_pb2.ProcessInput]:
        while True:
            m = self._q.get()
            if m is _END:
                return
            yield m  # type: ignore[misc]

    def _next(self) -> Optional[process_pb2.ProcessOutput]:
        try:
            return next(self._it)
        except StopIteration:
            return None

    # -- input -------------------------------------------------------------

    def write(self, data: Union[bytes, str]) -> None:
        """Sends bytes to the command's stdin (with stdin=boxd.PIPE)."""
        if isinstance(data, str):
            data = data.encode()
        for i in range(0, len(data), 1 << 20):
            self._q.put(process_pb2.ProcessInput(stdin=bytes(data[i:i + (1 << 20)])))

    def close_stdin(self) -> None:
        """EOF on the command's stdin."""
        self._q.put(process_pb2.ProcessInput(close_stdin=True))

    def signal(self, sig: str = "SIGINT") -> None:
        """Sends a signal ("SIGINT", "INT" or "2") to the command's process
        group; SIGKILL kills its whole tree."""
        self._q.put(process_pb2.ProcessInput(signal=sig))

    def resize(self, rows: int, cols: int) -> None:
        self._q.put(process_pb2.ProcessInput(resize=process_pb2.WindowSize(rows=rows, cols=cols)))

    # -- output ------------------------------------------------------------

    def __iter__(self) -> Iterator[Output]:
        while not self._done:
            msg = self._next()
            if msg is None:
                self._finish()
                break
            kind = msg.WhichOneof("event")
            if kind == "stdout":
                yield Output("stdout", msg.stdout)
            elif kind == "stderr":
                yield Output("stderr", msg.stderr)
            elif kind == "result":
                self.result = ExecResult._from(msg.result)
                self._finish()
        if self.result is None and self.process is None:
            raise errors.Unavailable("the stream ended without a result")

    def wait(self, on_stdout: OnOutput = None, on_stderr: OnOutput = None) -> ExecResult:
        """Reads the rest of the output and returns the result. Output goes to
        the callbacks if given, else it is collected into the result."""
        out: List[bytes] = []
        err: List[bytes] = []
        for o in self:
            if o.stream == "stdout":
                on_stdout(o.data) if on_stdout else out.append(o.data)
            else:
                on_stderr(o.data) if on_stderr else err.append(o.data)
        if self.result is None:
            # attach with follow=False on a running process: no result yet.
            raise errors.FailedPrecondition("the process is still running (attached without follow)")
        self.result.stdout = b"".join(out)
        self.result.stderr = b"".join(err)
        return self.result

    def _finish(self) -> None:
        self._done = True
        self._q.put(_END)

    def cancel(self) -> None:
        """Ends the call (kills a foreground command's process tree)."""
        if not self._done:
            self._finish()
            self._stream.close()

    def __enter__(self) -> "Execution":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Processes:
    """Background processes of one sandbox (``sb.processes``). They live in
    the sandbox's init, so they outlive this client and boxd restarts."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def start(self, args: Union[str, Sequence[str]], *, env: Union[Mapping[str, str], Sequence[str], None] = None,
              workdir: Optional[str] = None, user: Optional[str] = None,
              timeout: Union[float, str, None] = None, stdin: Union[bytes, str, None] = None,
              keep_stdin_open: bool = False, tty: bool = False,
              request_timeout: Optional[float] = None) -> ProcessInfo:
        """Starts a command in the background and returns at once."""
        spec = self._sb._spec(args, env=env, workdir=workdir, user=user, timeout=timeout, stdin=stdin, tty=tty)
        spec.keep_stdin_open = keep_stdin_open
        c = self._sb._client
        r = c.unary(c.process.Start, process_pb2.StartProcessRequest(spec=spec), request_timeout)
        return ProcessInfo._from(r.process)

    def list(self, request_timeout: Optional[float] = None) -> List[ProcessInfo]:
        c = self._sb._client
        r = c.unary(c.process.List, process_pb2.ListProcessesRequest(sandbox_id=self._sb.id), request_timeout)
        return [ProcessInfo._from(p) for p in r.processes]

    def get(self, process_id: str) -> ProcessInfo:
        for p in self.list():
            if p.id == process_id:
                return p
        raise errors.NotFound(f"process {process_id!r} not found in sandbox {self._sb.id}")

    def wait(self, process_id: str, request_timeout: Optional[float] = None) -> ProcessInfo:
        """Blocks until the process has exited; its result is in .result."""
        c = self._sb._client
        req = process_pb2.WaitProcessRequest(sandbox_id=self._sb.id, process_id=process_id)
        return ProcessInfo._from(c.unary(c.process.Wait, req, request_timeout).process)

    def kill(self, process_id: str, signal: str = "SIGKILL", request_timeout: Optional[float] = None) -> ProcessInfo:
        """Signals the process group (SIGKILL: the whole tree)."""
        c = self._sb._client
        req = process_pb2.SignalProcessRequest(sandbox_id=self._sb.id, process_id=process_id, signal=signal)
        return ProcessInfo._from(c.unary(c.process.Signal, req, request_timeout).process)

    def attach(self, process_id: str, *, stdin: object = None, follow: bool = True,
               request_timeout: Optional[float] = None) -> Execution:
        """Connects to a process, running or exited: its buffered output,
        then (with follow) live output and the result. stdin=boxd.PIPE
        passes write()/close_stdin() on (if its stdin is open). Ending the
        attachment leaves the process running."""
        first = process_pb2.ProcessInput(attach=process_pb2.AttachRequest(
            sandbox_id=self._sb.id, process_id=process_id, stdin=stdin is PIPE, no_follow=not follow))
        return Execution(self._sb, first, stdin, request_timeout, attach=True)


class Session:
    """A named persistent shell: cd, export and functions persist between
    commands."""

    def __init__(self, sandbox: "Sandbox", info: SessionInfo) -> None:
        self._sb = sandbox
        self.name = info.name
        self.info = info

    def exec(self, command: str, *, timeout: Union[float, str, None] = None, output_limit: int = 0,
             on_stdout: OnOutput = None, on_stderr: OnOutput = None,
             request_timeout: Optional[float] = None) -> SessionResult:
        """Runs shell text in the session, as if typed at its prompt."""
        c = self._sb._client
        req = process_pb2.SessionExecRequest(sandbox_id=self._sb.id, name=self.name, command=command,
                                             timeout=duration(timeout), output_limit=output_limit)
        out: List[bytes] = []
        err: List[bytes] = []
        result: Optional[SessionResult] = None
        with c.stream(c.process.SessionExec, req, request_timeout) as s:
            for msg in s:
                kind = msg.WhichOneof("event")
                if kind == "stdout":
                    on_stdout(msg.stdout) if on_stdout else out.append(msg.stdout)
                elif kind == "stderr":
                    on_stderr(msg.stderr) if on_stderr else err.append(msg.stderr)
                elif kind == "result":
                    base = ExecResult._from(msg.result.result, b"".join(out), b"".join(err))
                    result = SessionResult(**base.__dict__, session_restarted=msg.result.session_restarted,
                                           session_ended=msg.result.session_ended)
        if result is None:
            raise errors.Unavailable("the session stream ended without a result")
        return result

    def delete(self) -> None:
        self._sb.sessions.delete(self.name)


class Sessions:
    """Named persistent shells of one sandbox (``sb.sessions``)."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def create(self, name: str, *, shell: str = "", user: Optional[str] = None,
               env: Union[Mapping[str, str], Sequence[str], None] = None,
               workdir: Optional[str] = None) -> Session:
        c = self._sb._client
        req = process_pb2.CreateSessionRequest(sandbox_id=self._sb.id, name=name, shell=shell, user=user or "",
                                               env=env_list(env), workdir=workdir or "")
        return Session(self._sb, SessionInfo._from(c.unary(c.process.CreateSession, req).session))

    def get(self, name: str) -> Session:
        for s in self.list():
            if s.name == name:
                return Session(self._sb, s)
        raise errors.NotFound(f"session {name!r} not found in sandbox {self._sb.id}")

    def list(self) -> List[SessionInfo]:
        c = self._sb._client
        r = c.unary(c.process.ListSessions, process_pb2.ListSessionsRequest(sandbox_id=self._sb.id))
        return [SessionInfo._from(s) for s in r.sessions]

    def delete(self, name: str) -> None:
        c = self._sb._client
        c.unary(c.process.DeleteSession, process_pb2.DeleteSessionRequest(sandbox_id=self._sb.id, name=name))
