"""The asyncio variant of the SDK: the same calls, awaited, on grpc.aio
(file reads over HTTP/1.1 on the event loop, as in the sync SDK: see
boxd/_http1.py).

    import boxd.aio
    async with boxd.aio.Sandbox.create(memory="256m", ttl="1h") as sb:
        r = await sb.exec(["sh", "-c", "echo hi"], timeout=5)
        await sb.files.write("/workspace/a.txt", b"data")
        async for out in sb.exec_stream(["sh", "-c", "echo 1; sleep 1; echo 2"]):
            print(out.stream, out.data)

Results, errors and argument meanings are those of the sync API (boxd).
"""

from __future__ import annotations

import asyncio
import io
import weakref
from typing import Any, AsyncIterator, Awaitable, Callable, Generator, List, Mapping, Optional, Sequence, Union

import grpc
import grpc.aio

from . import _http1, _wire, errors
from ._client import _MAX_MESSAGE, CHUNK, _Service, default_socket, remote
from .files import (Data, SearchResult, UploadItem, UploadResult, _chunks, _grep_request, _read_lines_request,
                    _search_result, _upload_requests, _DOWNLOAD_SPLIT, _READ_SPLIT, _WRITE_DATA)
from .process import PIPE, argv, env_list, split_stdin
from .images import build_requests, import_requests, pull_request, push_request
from .sandbox import copy_in_requests, create_request, fork_request, update_request
from .types import (BuildResult, Changes, DownloadedFile, EditResult, Event, ExecResult, FileInfo, FileResult, GrepMatch,
                    Image, Lines, NetworkStatus, Output, PathStat, Pool, ProcessInfo, PublishedPort, SandboxInfo,
                    SandboxStats, SessionInfo, SessionResult, TransferProgress, duration)
from .v1 import boxd_pb2, diff_pb2, events_pb2, files_pb2, pool_pb2, process_pb2, registry_pb2

__all__ = ["Client", "Sandbox", "Execution", "list", "events", "images", "PIPE"]

Env = Union[Mapping[str, str], Sequence[str], None]
OnOutput = Optional[Callable[[bytes], Any]]


class Client:
    """A grpc.aio connection to boxd; make it inside the event loop that
    uses it. socket, timeout, host, token, tls_ca, tls_cert and tls_key as
    boxd.Client."""

    def __init__(self, socket: Optional[str] = None, *, timeout: Optional[float] = None, host: Optional[str] = None,
                 token: Optional[str] = None, tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None) -> None:
        import os

        r = remote(host, token, tls_ca, tls_cert, tls_key)
        self.host = r.host if r else None
        self.socket = None if r else (socket or default_socket())
        self.where = r.host if r else self.socket
        self.timeout = timeout
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE),
                   ("grpc.max_send_message_length", _MAX_MESSAGE),
                   ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.initial_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000)]
        if r:
            self._channel = grpc.aio.secure_channel(r.target, r.credentials, options=options)
        else:
            options.append(("grpc.default_authority", "localhost"))
            self._channel = grpc.aio.insecure_channel("unix:" + os.path.abspath(self.socket), options=options)
        self.sandbox = _Service(self._channel, boxd_pb2.DESCRIPTOR.services_by_name["SandboxService"], boxd_pb2)
        self.files = _Service(self._channel, files_pb2.DESCRIPTOR.services_by_name["FileService"], files_pb2)
        self.process = _Service(self._channel, process_pb2.DESCRIPTOR.services_by_name["ProcessService"],
                                process_pb2)
        self.events = _Service(self._channel, events_pb2.DESCRIPTOR.services_by_name["EventService"], events_pb2)
        self.registry = _Service(self._channel, registry_pb2.DESCRIPTOR.services_by_name["RegistryService"],
                                 registry_pb2)
        self.pool = _Service(self._channel, pool_pb2.DESCRIPTOR.services_by_name["PoolService"], pool_pb2)
        # File reads go over HTTP/1.1, as in the sync client (see _http1);
        # with a host, over the gRPC channel.
        self.http1 = _http1.AsyncPool(self.socket) if self.socket else None

    def __repr__(self) -> str:
        return f"boxd.aio.Client({self.where!r})"

    def _t(self, request_timeout: Optional[float]) -> Optional[float]:
        return self.timeout if request_timeout is None else request_timeout

    async def unary(self, method: Any, request: Any, request_timeout: Optional[float] = None) -> Any:
        try:
            return await method(request, timeout=self._t(request_timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self.where) from None

    async def stream(self, method: Any, request: Any, request_timeout: Optional[float] = None) -> AsyncIterator[Any]:
        call = method(request, timeout=self._t(request_timeout))
        try:
            async for msg in call:
                yield msg
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self.where) from None
        finally:
            call.cancel()

    async def read_stream(self, method: str, request: Any, split: Callable[[Any], Any],
                          request_timeout: Optional[float] = None) -> AsyncIterator[Any]:
        """boxd.Client.read_stream, awaited: each response is split(view of
        the message), the view valid until the next one."""
        if self.http1 is None:
            split_method = getattr(self.files, method.rsplit("/", 1)[1] + "Split")  # FileService's
            async for msg in self.stream(split_method, request, request_timeout):
                yield msg
            return
        async with _aclosing(self.http1.server_stream(method, request.SerializeToString(),
                                                      self._t(request_timeout))) as s:
            async for mv in s:
                yield split(mv)

    async def close(self) -> None:
        if self.http1 is not None:
            self.http1.close()
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _aclosing:
    """Closes an async generator when the block is left, at once (an async
    generator left in an async for is otherwise closed by the garbage
    collector, later): a file read left early cancels its call then.
    contextlib.aclosing, which Python 3.9 lacks."""

    def __init__(self, it: Any) -> None:
        self.it = it

    async def __aenter__(self) -> Any:
        return self.it

    async def __aexit__(self, *exc: object) -> None:
        await self.it.aclose()


# grpc.aio channels belong to the loop they were made in.
_defaults: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client]" = weakref.WeakKeyDictionary()


def default_client() -> Client:
    """One client per running event loop, on default_socket()."""
    loop = asyncio.get_running_loop()
    c = _defaults.get(loop)
    if c is None:
        c = _defaults[loop] = Client()
    return c


class _Creating:
    """Sandbox.create(...): await it, or use it with `async with` (the
    sandbox is deleted on exit)."""

    def __init__(self, coro: Awaitable["Sandbox"]) -> None:
        self._coro = coro
        self._sb: Optional[Sandbox] = None

    def __await__(self) -> Generator[Any, None, "Sandbox"]:
        return self._coro.__await__()  # type: ignore[attr-defined]

    async def __aenter__(self) -> "Sandbox":
        self._sb = await self._coro
        return self._sb

    async def __aexit__(self, *exc: object) -> None:
        if self._sb is not None:
            await self._sb.__aexit__(*exc)


class Sandbox:
    def __init__(self, info: SandboxInfo, client: Client) -> None:
        self._client = client
        self._info = info
        self.id = info.id
        self.files = Files(self)
        self.processes = Processes(self)
        self.sessions = Sessions(self)

    def __repr__(self) -> str:
        return f"aio.Sandbox(id={self.id!r})"

    @classmethod
    def create(cls, image: Optional[str] = None, *, memory: Union[str, int, None] = None,
               cpus: Optional[float] = None, pids: Optional[int] = None, env: Env = None,
               workdir: Optional[str] = None, labels: Optional[Mapping[str, str]] = None,
               name: Optional[str] = None, ttl: Union[float, str, None] = None,
               user: Optional[str] = None, read_only: bool = False, tmpfs: Sequence[str] = (),
               ulimits: Sequence[str] = (), hostname: Optional[str] = None, replace: bool = False,
               publish: Sequence[Union[int, PublishedPort]] = (), allow: Optional[Sequence[str]] = None,
               pull: Optional[str] = None, auth: Optional[Mapping[str, str]] = None,
               disk: Union[str, int, None] = None, network: Optional[str] = None,
               idle_timeout: Union[float, str, None] = None, on_idle: Optional[str] = None,
               cpu_weight: Optional[int] = None, memory_low: Union[str, int, None] = None,
               exec_timeout: Union[float, str, None] = None, output_limit: Optional[int] = None,
               runtime: Optional[str] = None, cold: bool = False, volumes: Sequence[str] = (),
               binds: Sequence[str] = (), secrets: Sequence[str] = (),
               auto_resume: bool = False,
               git: Optional[str] = None, git_depth: int = 0,
               client: Optional[Client] = None, request_timeout: Optional[float] = None) -> _Creating:
        async def make() -> "Sandbox":
            c = client or default_client()
            req = create_request(image, memory=memory, cpus=cpus, pids=pids, env=env, workdir=workdir,
                                 labels=labels, name=name, ttl=ttl, user=user, read_only=read_only, tmpfs=tmpfs,
                                 ulimits=ulimits, hostname=hostname, replace=replace, publish=publish, allow=allow,
                                 pull=pull, auth=auth, disk=disk, network=network, idle_timeout=idle_timeout,
                                 on_idle=on_idle, cpu_weight=cpu_weight, memory_low=memory_low,
                                 exec_timeout=exec_timeout, output_limit=output_limit, runtime=runtime, cold=cold,
                                 volumes=volumes, binds=binds, secrets=secrets,
                                 auto_resume=auto_resume, git=git, git_depth=git_depth)
            r = await c.unary(c.sandbox.CreateSandbox, req, request_timeout)
            return cls(SandboxInfo._from(r.sandbox), c)

        return _Creating(make())

    @classmethod
    async def connect(cls, sandbox_id: str, *, client: Optional[Client] = None) -> "Sandbox":
        c = client or default_client()
        r = await c.unary(c.sandbox.GetSandbox, boxd_pb2.GetSandboxRequest(id=sandbox_id))
        return cls(SandboxInfo._from(r.sandbox), c)

    @property
    def name(self) -> str:
        return self._info.name

    async def info(self) -> SandboxInfo:
        r = await self._client.unary(self._client.sandbox.GetSandbox, boxd_pb2.GetSandboxRequest(id=self.id))
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    async def delete(self, timeout: Union[float, str, None] = None, *, force: bool = False, background: bool = False,
                     request_timeout: Optional[float] = None) -> None:
        """As boxd.Sandbox.delete."""
        req = boxd_pb2.DeleteSandboxRequest(id=self.id, timeout=duration(timeout), force=force, background=background)
        await self._client.unary(self._client.sandbox.DeleteSandbox, req, request_timeout)

    async def update(self, *, ttl: Union[float, str, None] = None, extend: Union[float, str, None] = None,
                     memory: Union[str, int, None] = None, cpus: Optional[float] = None, pids: Optional[int] = None,
                     env: Env = None, workdir: Optional[str] = None,
                     request_timeout: Optional[float] = None) -> SandboxInfo:
        req = update_request(self.id, ttl=ttl, extend=extend, memory=memory, cpus=cpus, pids=pids, env=env,
                             workdir=workdir)
        r = await self._client.unary(self._client.sandbox.UpdateSandbox, req, request_timeout)
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    async def stop(self, timeout: Union[float, str, None] = None, *,
                   request_timeout: Optional[float] = None) -> SandboxInfo:
        req = boxd_pb2.StopSandboxRequest(sandbox_id=self.id, timeout=duration(timeout))
        r = await self._client.unary(self._client.sandbox.StopSandbox, req, request_timeout)
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    async def start(self, *, request_timeout: Optional[float] = None) -> SandboxInfo:
        r = await self._client.unary(self._client.sandbox.StartSandbox,
                                     boxd_pb2.StartSandboxRequest(sandbox_id=self.id), request_timeout)
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    async def pause(self) -> None:
        await self._client.unary(self._client.sandbox.PauseSandbox, boxd_pb2.PauseSandboxRequest(id=self.id))

    async def unpause(self) -> None:
        await self._client.unary(self._client.sandbox.UnpauseSandbox, boxd_pb2.UnpauseSandboxRequest(id=self.id))

    resume = unpause

    async def stats(self) -> SandboxStats:
        async for msg in self._client.stream(self._client.sandbox.Stats, boxd_pb2.StatsRequest(ids=[self.id])):
            for x in msg.sandboxes:
                return SandboxStats._from(x)
        raise errors.Unknown(f"boxd sent no stats for sandbox {self.id}")

    async def stats_stream(self, interval: Union[float, str, None] = None) -> AsyncIterator[SandboxStats]:
        req = boxd_pb2.StatsRequest(ids=[self.id], stream=True, interval=duration(interval))
        async for msg in self._client.stream(self._client.sandbox.Stats, req):
            for x in msg.sandboxes:
                yield SandboxStats._from(x)

    async def diff(self, since: str = "create", *, patch: bool = False) -> Changes:
        out = Changes()
        done = False
        req = diff_pb2.DiffSandboxRequest(sandbox_id=self.id, since=since, patch=patch)
        async for msg in self._client.stream(self._client.sandbox.DiffSandbox, req):
            done = out._add(msg)
        if not done:
            raise errors.Unavailable(f"the diff of sandbox {self.id} ended early")
        return out

    # -- images, forks, ports, network, tar copies (as boxd.Sandbox) ---------

    async def commit(self, ref: str, *, message: str = "", force: bool = False,
                     request_timeout: Optional[float] = None) -> Image:
        req = boxd_pb2.CommitSandboxRequest(sandbox_id=self.id, ref=ref, message=message, force=force)
        return Image._from((await self._client.unary(self._client.sandbox.CommitSandbox, req, request_timeout)).image)

    async def fork(self, count: int = 0, *, names: Sequence[str] = (), memory: Union[str, int, None] = None,
                   cpus: Optional[float] = None, pids: Optional[int] = None, env: Env = None,
                   workdir: Optional[str] = None, labels: Optional[Mapping[str, str]] = None,
                   ttl: Union[float, str, None] = None, clone_volumes: bool = False,
                   share_volumes: bool = False, with_processes: bool = False, request_timeout: Optional[float] = None) -> List["Sandbox"]:
        req = fork_request(self.id, count, names=names, memory=memory, cpus=cpus, pids=pids, env=env,
                           workdir=workdir, labels=labels, ttl=ttl, clone_volumes=clone_volumes,
                           share_volumes=share_volumes, with_processes=with_processes)
        r = await self._client.unary(self._client.sandbox.ForkSandbox, req, request_timeout)
        return [Sandbox(SandboxInfo._from(x), self._client) for x in r.sandboxes]

    async def publish_port(self, port: int, *, host_port: int = 0, host_ip: str = "",
                           request_timeout: Optional[float] = None) -> PublishedPort:
        req = boxd_pb2.PublishPortRequest(sandbox_id=self.id, port=boxd_pb2.PublishedPort(
            host_ip=host_ip, host_port=host_port, port=port))
        r = await self._client.unary(self._client.sandbox.PublishPort, req, request_timeout)
        return PublishedPort._from(r.port)

    async def unpublish_port(self, port: int = 0, *, host_port: int = 0,
                             request_timeout: Optional[float] = None) -> List[PublishedPort]:
        req = boxd_pb2.UnpublishPortRequest(sandbox_id=self.id, port=port, host_port=host_port)
        r = await self._client.unary(self._client.sandbox.UnpublishPort, req, request_timeout)
        return [PublishedPort._from(p) for p in r.ports]

    async def ports(self) -> List[PublishedPort]:
        return (await self.info()).ports

    async def update_network(self, *, allow: Sequence[str] = (), deny: Sequence[str] = (),
                             request_timeout: Optional[float] = None) -> NetworkStatus:
        req = boxd_pb2.UpdateNetworkRequest(sandbox_id=self.id, allow=[*allow], deny=[*deny])
        r = await self._client.unary(self._client.sandbox.UpdateNetwork, req, request_timeout)
        return NetworkStatus._from(r.network)

    async def copy_in(self, path: str, tar: Data, *, request_timeout: Optional[float] = None) -> None:
        await self._client.unary(self._client.sandbox.CopyIn, copy_in_requests(self.id, path, tar), request_timeout)

    async def copy_out_stream(self, path: str, *, request_timeout: Optional[float] = None) -> AsyncIterator[bytes]:
        req = boxd_pb2.CopyOutRequest(sandbox_id=self.id, path=path)
        async for msg in self._client.stream(self._client.sandbox.CopyOut, req, request_timeout):
            if msg.data:
                yield msg.data

    async def copy_out(self, path: str, *, request_timeout: Optional[float] = None) -> bytes:
        buf = io.BytesIO()
        async for b in self.copy_out_stream(path, request_timeout=request_timeout):
            buf.write(b)
        return buf.getvalue()

    async def stat_path(self, path: str, *, request_timeout: Optional[float] = None) -> PathStat:
        r = await self._client.unary(self._client.sandbox.StatPath,
                                     boxd_pb2.StatPathRequest(sandbox_id=self.id, path=path), request_timeout)
        return PathStat._from(r)

    async def exec_output(self, args: Union[str, Sequence[str]], *, stdin: Union[bytes, str, None] = None,
                          env: Env = None, workdir: Optional[str] = None, timeout: Union[float, str, None] = None,
                          output_limit: int = 0, request_timeout: Optional[float] = None) -> AsyncIterator[Any]:
        """boxd's one-way ExecStream: yields Output pieces as they are
        produced, then the ExecResult (without output) last."""
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin or b"")
        req = boxd_pb2.ExecRequest(sandbox_id=self.id, args=argv(args), env=env_list(env), workdir=workdir or "",
                                   timeout=duration(timeout), stdin=data, output_limit=output_limit)
        async for msg in self._client.stream(self._client.sandbox.ExecStream, req, request_timeout):
            kind = msg.WhichOneof("event")
            if kind == "result":
                yield ExecResult._from(msg.result)
            elif kind is not None:
                yield Output(kind, getattr(msg, kind))

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.delete()
        except errors.NotFound:
            pass

    def _spec(self, args: Union[str, Sequence[str]], *, env: Env = None, workdir: Optional[str] = None,
              user: Optional[str] = None, timeout: Union[float, str, None] = None, stdin: Any = None,
              tty: bool = False, output_limit: int = 0) -> process_pb2.ProcessSpec:
        data = stdin.encode() if isinstance(stdin, str) else (
            bytes(stdin) if isinstance(stdin, (bytes, bytearray, memoryview)) else b"")
        return process_pb2.ProcessSpec(sandbox_id=self.id, args=argv(args), env=env_list(env), workdir=workdir or "",
                                       user=user or "", timeout=duration(timeout), tty=tty, stdin=data,
                                       output_limit=output_limit)

    async def exec(self, args: Union[str, Sequence[str]], *, stdin: Any = None, env: Env = None,
                   workdir: Optional[str] = None, user: Optional[str] = None,
                   timeout: Union[float, str, None] = None, output_limit: int = 0,
                   on_stdout: OnOutput = None, on_stderr: OnOutput = None,
                   request_timeout: Optional[float] = None) -> ExecResult:
        # One Exec message holds stdin up to a CHUNK; more goes over the
        # stream in pieces (split_stdin).
        first, rest = split_stdin(stdin, CHUNK)
        simple = (stdin is None or rest is stdin and isinstance(stdin, (bytes, bytearray, memoryview, str))) \
            and on_stdout is None and on_stderr is None and not user
        if simple:
            data = first
            req = boxd_pb2.ExecRequest(sandbox_id=self.id, args=argv(args), env=env_list(env), workdir=workdir or "",
                                       timeout=duration(timeout), stdin=data, output_limit=output_limit)
            r = await self._client.unary(self._client.sandbox.Exec, req, request_timeout)
            return ExecResult._from(r.result, r.stdout, r.stderr)
        async with self.exec_stream(args, stdin=stdin, env=env, workdir=workdir, user=user, timeout=timeout,
                                    output_limit=output_limit, request_timeout=request_timeout) as ex:
            return await ex.wait(on_stdout=on_stdout, on_stderr=on_stderr)

    def exec_stream(self, args: Union[str, Sequence[str]], *, stdin: Any = None, env: Env = None,
                    workdir: Optional[str] = None, user: Optional[str] = None,
                    timeout: Union[float, str, None] = None, output_limit: int = 0, tty: bool = False,
                    request_timeout: Optional[float] = None) -> "Execution":
        """An Execution: `async for out in ...`, then .result. stdin as in
        boxd.Sandbox.exec_stream (an iterable may also be async)."""
        first, rest = split_stdin(stdin)
        spec = self._spec(args, env=env, workdir=workdir, user=user, timeout=timeout, stdin=first, tty=tty,
                          output_limit=output_limit)
        return Execution(self._client, process_pb2.ProcessInput(start=spec), rest, request_timeout)


class Execution:
    """A command on a bidirectional stream; see boxd.Execution."""

    def __init__(self, client: Client, first: process_pb2.ProcessInput, stdin: Any,
                 request_timeout: Optional[float], attach: bool = False) -> None:
        self._client = client
        self._first = first
        self._stdin = stdin
        self._attach = attach
        method = client.process.Attach if attach else client.process.Exec
        self._call = method(timeout=client._t(request_timeout))
        self._started = False
        self._feeder: Optional[asyncio.Task] = None
        self.result: Optional[ExecResult] = None
        self.process: Optional[ProcessInfo] = None

    async def _start(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            await self._call.write(self._first)
            s = self._stdin
            if s is PIPE:
                return
            if s is None or isinstance(s, (bytes, bytearray, memoryview, str)):
                if not self._attach:
                    await self._call.write(process_pb2.ProcessInput(close_stdin=True))
                return
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self._client.where) from None
        self._feeder = asyncio.ensure_future(self._feed(s))

    async def _feed(self, chunks: Any) -> None:
        try:
            if hasattr(chunks, "__aiter__"):
                async for c in chunks:
                    await self.write(c)
            else:
                for c in chunks:
                    await self.write(c)
            await self.close_stdin()
        except (grpc.RpcError, errors.BoxdError, asyncio.InvalidStateError):
            pass  # the call ended; the output side reports why

    async def write(self, data: Union[bytes, str]) -> None:
        if isinstance(data, str):
            data = data.encode()
        for i in range(0, len(data), CHUNK):
            await self._call.write(process_pb2.ProcessInput(stdin=bytes(data[i:i + CHUNK])))

    async def close_stdin(self) -> None:
        await self._call.write(process_pb2.ProcessInput(close_stdin=True))

    async def signal(self, sig: str = "SIGINT") -> None:
        await self._call.write(process_pb2.ProcessInput(signal=sig))

    async def resize(self, rows: int, cols: int) -> None:
        await self._call.write(process_pb2.ProcessInput(resize=process_pb2.WindowSize(rows=rows, cols=cols)))

    async def __aiter__(self) -> AsyncIterator[Output]:
        await self._start()
        try:
            while True:
                msg = await self._call.read()
                if msg is grpc.aio.EOF:
                    break
                kind = msg.WhichOneof("event")
                if kind == "stdout":
                    yield Output("stdout", msg.stdout)
                elif kind == "stderr":
                    yield Output("stderr", msg.stderr)
                elif kind == "process":
                    self.process = ProcessInfo._from(msg.process)
                elif kind == "result":
                    self.result = ExecResult._from(msg.result)
                    break
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self._client.where) from None

    async def wait(self, on_stdout: OnOutput = None, on_stderr: OnOutput = None) -> ExecResult:
        out: List[bytes] = []
        err: List[bytes] = []
        async for o in self:
            cb = on_stdout if o.stream == "stdout" else on_stderr
            if cb is not None:
                r = cb(o.data)
                if asyncio.iscoroutine(r):
                    await r
            else:
                (out if o.stream == "stdout" else err).append(o.data)
        if self.result is None:
            raise errors.FailedPrecondition("the process is still running (attached without follow)")
        self.result.stdout, self.result.stderr = b"".join(out), b"".join(err)
        return self.result

    def cancel(self) -> None:
        self._call.cancel()
        if self._feeder is not None:
            self._feeder.cancel()

    async def __aenter__(self) -> "Execution":
        await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class Files:
    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox
        self._c = sandbox._client

    async def write(self, path: str, data: Data, *, mode: Optional[int] = None, parents: bool = False,
                    in_place: bool = False, append: bool = False, exclusive: bool = False,
                    user: Optional[str] = None, request_timeout: Optional[float] = None) -> FileInfo:
        first = files_pb2.WriteFileRequest(sandbox_id=self._sb.id, path=path, user=user or "", parents=parents,
                                           in_place=in_place, append=append, exclusive=exclusive)
        if mode is not None:
            first.mode = mode

        def requests() -> Any:
            it = _chunks(data)
            first.data = bytes(next(it, b""))
            yield first
            for c in it:
                yield _wire.data_message(_WRITE_DATA, c)

        r = await self._c.unary(self._c.files.WriteFile, requests(), request_timeout)
        return FileInfo._from(r.info)

    async def _views(self, path: str, offset: int, length: int, user: Optional[str], no_follow: bool,
                     request_timeout: Optional[float]) -> AsyncIterator[memoryview]:
        req = files_pb2.ReadFileRequest(sandbox_id=self._sb.id, path=path, user=user or "", offset=offset,
                                        length=length, no_follow=no_follow)
        # Views of the connection's buffer, valid until the next is asked for.
        async with _aclosing(self._c.read_stream("/boxd.v1.FileService/ReadFile", req, _READ_SPLIT,
                                                 request_timeout)) as s:
            async for msg in s:
                if msg.data is not None and len(msg.data):
                    yield msg.data

    async def read_stream(self, path: str, *, offset: int = 0, length: int = 0, user: Optional[str] = None,
                          no_follow: bool = False, request_timeout: Optional[float] = None) -> AsyncIterator[bytes]:
        async with _aclosing(self._views(path, offset, length, user, no_follow, request_timeout)) as s:
            async for v in s:
                yield bytes(v)

    async def read(self, path: str, *, offset: int = 0, length: int = 0, user: Optional[str] = None,
                   no_follow: bool = False, request_timeout: Optional[float] = None) -> bytes:
        buf = io.BytesIO()  # see boxd.Files.read
        async with _aclosing(self._views(path, offset, length, user, no_follow, request_timeout)) as s:
            async for v in s:
                buf.write(v)
        return buf.getvalue()

    async def read_into(self, path: str, out: Any, *, offset: int = 0, length: int = 0, user: Optional[str] = None,
                        no_follow: bool = False, request_timeout: Optional[float] = None) -> int:
        """Streams the file into a binary file object (its write() may be a
        coroutine function); returns the size."""
        n = 0
        async with _aclosing(self._views(path, offset, length, user, no_follow, request_timeout)) as s:
            async for v in s:
                r = out.write(v)
                if asyncio.iscoroutine(r):
                    await r
                n += len(v)
        return n

    async def read_text(self, path: str, encoding: str = "utf-8", **kw: Any) -> str:
        return (await self.read(path, **kw)).decode(encoding)

    async def write_text(self, path: str, text: str, encoding: str = "utf-8", **kw: Any) -> FileInfo:
        return await self.write(path, text.encode(encoding), **kw)

    async def stat(self, path: str, *, follow: bool = False, user: Optional[str] = None) -> FileInfo:
        req = files_pb2.StatFileRequest(sandbox_id=self._sb.id, path=path, user=user or "", follow=follow)
        return FileInfo._from((await self._c.unary(self._c.files.StatFile, req)).info)

    async def exists(self, path: str, *, user: Optional[str] = None) -> bool:
        try:
            await self.stat(path, user=user)
            return True
        except errors.NotFound:
            return False

    async def list(self, path: str = ".", *, depth: int = 1, user: Optional[str] = None) -> List[FileInfo]:
        req = files_pb2.ListDirRequest(sandbox_id=self._sb.id, path=path, user=user or "", depth=depth)
        return [FileInfo._from(e) async for m in self._c.stream(self._c.files.ListDir, req) for e in m.entries]

    async def mkdir(self, path: str, *, parents: bool = False, mode: Optional[int] = None,
                    user: Optional[str] = None) -> None:
        req = files_pb2.MakeDirRequest(sandbox_id=self._sb.id, path=path, user=user or "", parents=parents)
        if mode is not None:
            req.mode = mode
        await self._c.unary(self._c.files.MakeDir, req)

    async def rm(self, path: str, *, recursive: bool = False, user: Optional[str] = None) -> None:
        await self._c.unary(self._c.files.RemovePath, files_pb2.RemovePathRequest(
            sandbox_id=self._sb.id, path=path, user=user or "", recursive=recursive))

    async def mv(self, src: str, dst: str, *, no_overwrite: bool = False, user: Optional[str] = None) -> None:
        await self._c.unary(self._c.files.RenamePath, files_pb2.RenamePathRequest(
            sandbox_id=self._sb.id, src=src, dst=dst, user=user or "", no_overwrite=no_overwrite))

    async def chmod(self, path: str, mode: int, *, user: Optional[str] = None) -> None:
        await self._c.unary(self._c.files.ChmodPath, files_pb2.ChmodPathRequest(
            sandbox_id=self._sb.id, path=path, user=user or "", mode=mode))

    async def read_lines(self, path: str, *, offset: int = 0, limit: int = 0, max_line_bytes: int = 0,
                         user: Optional[str] = None) -> Lines:
        return Lines._from(await self._c.unary(self._c.files.ReadLines, _read_lines_request(
            self._sb.id, path, offset, limit, max_line_bytes, user)))

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False,
                   user: Optional[str] = None) -> EditResult:
        return EditResult._from(await self._c.unary(self._c.files.EditFile, files_pb2.EditFileRequest(
            sandbox_id=self._sb.id, path=path, user=user or "", old_string=old, new_string=new,
            replace_all=replace_all)))

    async def glob(self, pattern: str, *, path: Optional[str] = None, limit: int = 0,
                   user: Optional[str] = None) -> SearchResult:
        r = await self._c.unary(self._c.files.Glob, files_pb2.GlobRequest(
            sandbox_id=self._sb.id, pattern=pattern, path=path or "", user=user or "", limit=limit))
        return _search_result((FileInfo._from(m) for m in r.matches), r)

    async def grep(self, pattern: str, path: Optional[str] = None, *, glob: Optional[str] = None,
                   ignore_case: bool = False, literal: bool = False, limit: int = 0, max_line_bytes: int = 0,
                   user: Optional[str] = None) -> SearchResult:
        r = await self._c.unary(self._c.files.Grep, _grep_request(self._sb.id, pattern, path, glob, ignore_case,
                                                                   literal, limit, max_line_bytes, user))
        return _search_result((GrepMatch._from(m) for m in r.matches), r)

    async def chown(self, path: str, owner: str, *, recursive: bool = False, user: Optional[str] = None) -> None:
        await self._c.unary(self._c.files.ChownPath, files_pb2.ChownPathRequest(
            sandbox_id=self._sb.id, path=path, owner=owner, user=user or "", recursive=recursive))

    async def upload(self, files: Union[Mapping[str, Data], Sequence[UploadItem]], *, parents: bool = False,
                     user: Optional[str] = None, request_timeout: Optional[float] = None) -> UploadResult:
        r = await self._c.unary(self._c.files.UploadFiles, _upload_requests(self._sb.id, files, user, parents),
                                request_timeout)
        res = UploadResult(FileResult._from(x) for x in r.results)
        res.files_written, res.bytes_written = r.files_written, r.bytes_written
        return res

    async def download(self, paths: Sequence[str], *, user: Optional[str] = None, no_follow: bool = False,
                       request_timeout: Optional[float] = None) -> List[DownloadedFile]:
        req = files_pb2.DownloadFilesRequest(sandbox_id=self._sb.id, paths=[*paths], user=user or "",
                                             no_follow=no_follow)
        out = [DownloadedFile(index=i, path=p) for i, p in enumerate(paths)]
        parts = [io.BytesIO() for _ in paths]
        async with _aclosing(self._c.read_stream("/boxd.v1.FileService/DownloadFiles", req, _DOWNLOAD_SPLIT,
                                                 request_timeout)) as s:
            async for msg in s:
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
                    out[i].error = errors.from_code(rest.done.error.code, rest.done.error.message)
        for f, p in zip(out, parts):
            f.data = b"" if f.error else p.getvalue()
        return out


class Processes:
    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox
        self._c = sandbox._client

    async def start(self, args: Union[str, Sequence[str]], *, env: Env = None, workdir: Optional[str] = None,
                    user: Optional[str] = None, timeout: Union[float, str, None] = None,
                    stdin: Union[bytes, str, None] = None, keep_stdin_open: bool = False,
                    tty: bool = False) -> ProcessInfo:
        spec = self._sb._spec(args, env=env, workdir=workdir, user=user, timeout=timeout, stdin=stdin, tty=tty)
        spec.keep_stdin_open = keep_stdin_open
        r = await self._c.unary(self._c.process.Start, process_pb2.StartProcessRequest(spec=spec))
        return ProcessInfo._from(r.process)

    async def list(self) -> List[ProcessInfo]:
        r = await self._c.unary(self._c.process.List, process_pb2.ListProcessesRequest(sandbox_id=self._sb.id))
        return [ProcessInfo._from(p) for p in r.processes]

    async def wait(self, process_id: str, request_timeout: Optional[float] = None) -> ProcessInfo:
        req = process_pb2.WaitProcessRequest(sandbox_id=self._sb.id, process_id=process_id)
        return ProcessInfo._from((await self._c.unary(self._c.process.Wait, req, request_timeout)).process)

    async def kill(self, process_id: str, signal: str = "SIGKILL") -> ProcessInfo:
        req = process_pb2.SignalProcessRequest(sandbox_id=self._sb.id, process_id=process_id, signal=signal)
        return ProcessInfo._from((await self._c.unary(self._c.process.Signal, req)).process)

    def attach(self, process_id: str, *, stdin: Any = None, follow: bool = True,
               request_timeout: Optional[float] = None) -> Execution:
        first = process_pb2.ProcessInput(attach=process_pb2.AttachRequest(
            sandbox_id=self._sb.id, process_id=process_id, stdin=stdin is PIPE, no_follow=not follow))
        return Execution(self._c, first, stdin, request_timeout, attach=True)


class Session:
    def __init__(self, sandbox: Sandbox, info: SessionInfo) -> None:
        self._sb = sandbox
        self.name = info.name
        self.info = info

    async def exec(self, command: str, *, timeout: Union[float, str, None] = None, output_limit: int = 0,
                   request_timeout: Optional[float] = None) -> SessionResult:
        c = self._sb._client
        req = process_pb2.SessionExecRequest(sandbox_id=self._sb.id, name=self.name, command=command,
                                             timeout=duration(timeout), output_limit=output_limit)
        out: List[bytes] = []
        err: List[bytes] = []
        async for msg in c.stream(c.process.SessionExec, req, request_timeout):
            kind = msg.WhichOneof("event")
            if kind == "stdout":
                out.append(msg.stdout)
            elif kind == "stderr":
                err.append(msg.stderr)
            elif kind == "result":
                base = ExecResult._from(msg.result.result, b"".join(out), b"".join(err))
                return SessionResult(**base.__dict__, session_restarted=msg.result.session_restarted,
                                     session_ended=msg.result.session_ended)
        raise errors.Unavailable("the session stream ended without a result")


class Sessions:
    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox
        self._c = sandbox._client

    async def create(self, name: str, *, shell: str = "", user: Optional[str] = None, env: Env = None,
                     workdir: Optional[str] = None) -> Session:
        req = process_pb2.CreateSessionRequest(sandbox_id=self._sb.id, name=name, shell=shell, user=user or "",
                                               env=env_list(env), workdir=workdir or "")
        return Session(self._sb, SessionInfo._from((await self._c.unary(self._c.process.CreateSession, req)).session))

    async def list(self) -> List[SessionInfo]:
        r = await self._c.unary(self._c.process.ListSessions, process_pb2.ListSessionsRequest(sandbox_id=self._sb.id))
        return [SessionInfo._from(s) for s in r.sessions]

    async def delete(self, name: str) -> None:
        await self._c.unary(self._c.process.DeleteSession,
                            process_pb2.DeleteSessionRequest(sandbox_id=self._sb.id, name=name))


async def list(labels: Optional[Mapping[str, str]] = None, *,  # noqa: A001
               client: Optional[Client] = None) -> List[SandboxInfo]:
    c = client or default_client()
    r = await c.unary(c.sandbox.ListSandboxes, boxd_pb2.ListSandboxesRequest(labels=dict(labels or {})))
    return [SandboxInfo._from(s) for s in r.sandboxes]


async def events(since: Optional[str] = None, *, filters: Sequence[str] = (), follow: bool = False,
                 client: Optional[Client] = None) -> AsyncIterator[Event]:
    """boxd's event log; arguments as boxd.events."""
    c = client or default_client()
    req = events_pb2.EventsRequest(since=since or "", filters=[*filters], follow=follow)
    async for msg in c.stream(c.events.Events, req):
        if msg.HasField("event"):
            yield Event._from(msg.event)


class _Images:
    """``boxd.aio.images``: the calls of boxd.images, awaited."""

    async def list(self, *, client: Optional[Client] = None,  # noqa: A003
                   request_timeout: Optional[float] = None) -> List[Image]:
        c = client or default_client()
        r = await c.unary(c.sandbox.ListImages, boxd_pb2.ListImagesRequest(), request_timeout)
        return [Image._from(i) for i in r.images]

    async def import_image(self, data: Data, *, name: str = "", rootfs: bool = False, force: bool = False,
                           client: Optional[Client] = None, request_timeout: Optional[float] = None) -> List[Image]:
        c = client or default_client()
        r = await c.unary(c.sandbox.ImportImage, import_requests(data, name, rootfs, force), request_timeout)
        return [Image._from(i) for i in r.images]

    async def remove(self, name: str, *, force: bool = False, client: Optional[Client] = None,
                     request_timeout: Optional[float] = None) -> None:
        c = client or default_client()
        await c.unary(c.sandbox.RemoveImage, boxd_pb2.RemoveImageRequest(name=name, force=force), request_timeout)

    async def build(self, ref: str, dockerfile: Union[str, bytes], context: Data = b"", *,
                    build_args: Optional[Mapping[str, str]] = None, force: bool = False, no_cache: bool = False,
                    client: Optional[Client] = None, request_timeout: Optional[float] = None) -> BuildResult:
        c = client or default_client()
        r = await c.unary(c.sandbox.BuildImage, build_requests(ref, dockerfile, context, build_args, force, no_cache),
                          request_timeout)
        return BuildResult._from(r)

    async def pull(self, reference: str, *, platform: str = "", auth: Optional[Mapping[str, str]] = None,
                   force: bool = False, on_progress: Optional[Callable[[TransferProgress], Any]] = None,
                   client: Optional[Client] = None, request_timeout: Optional[float] = None) -> Image:
        c = client or default_client()
        async for msg in c.stream(c.registry.PullImage, pull_request(reference, platform, auth, force),
                                  request_timeout):
            if msg.HasField("image"):
                return Image._from(msg.image)
            if on_progress is not None and msg.HasField("progress"):
                on_progress(TransferProgress._from(msg.progress))
        raise ConnectionError(f"boxd ended the pull of {reference} without an image")

    async def push(self, reference: str, *, source: str = "", auth: Optional[Mapping[str, str]] = None,
                   on_progress: Optional[Callable[[TransferProgress], Any]] = None,
                   client: Optional[Client] = None, request_timeout: Optional[float] = None) -> str:
        c = client or default_client()
        async for msg in c.stream(c.registry.PushImage, push_request(reference, source, auth), request_timeout):
            if msg.WhichOneof("msg") == "digest":
                return str(msg.digest)
            if on_progress is not None and msg.HasField("progress"):
                on_progress(TransferProgress._from(msg.progress))
        raise ConnectionError(f"boxd ended the push of {reference} without a digest")

    async def pool_sizes(self, *, client: Optional[Client] = None,
                         request_timeout: Optional[float] = None) -> List[Pool]:
        c = client or default_client()
        r = await c.unary(c.pool.ListPools, pool_pb2.ListPoolsRequest(), request_timeout)
        return [Pool._from(p) for p in r.pools]

    async def set_pool_size(self, image: str, size: int, *, runtime: str = "", client: Optional[Client] = None,
                            request_timeout: Optional[float] = None) -> Pool:
        c = client or default_client()
        r = await c.unary(c.pool.SetPoolSize, pool_pb2.SetPoolSizeRequest(image=image, size=size, runtime=runtime),
                          request_timeout)
        return Pool._from(r.pool)


images = _Images()
