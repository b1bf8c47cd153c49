"""Sandboxes: create, connect, list, delete, and run commands in them."""

from __future__ import annotations

import io
from typing import Any, Callable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _wire, errors
from . import code as _code
from .code import CodeResult
from ._client import CHUNK, Client, default_client
from .files import Data, Files, _chunks
from .process import PIPE, Execution, OnOutput, Processes, Sessions, Stdin, argv, env_list, split_stdin
from .types import (Changes, Event, ExecResult, Image, NetworkStatus, Output, PathStat, PublishedPort, SandboxInfo,
                    SandboxStats, duration)
from .v1 import events_pb2
from .v1 import boxd_pb2, diff_pb2, process_pb2

Env = Union[Mapping[str, str], Sequence[str], None]


class Sandbox:
    """One sandbox. Make one with Sandbox.create() or Sandbox.connect().

    As a context manager it deletes the sandbox on exit. ``files``,
    ``processes`` and ``sessions`` hold the file, background-process and
    session calls.
    """

    def __init__(self, info: SandboxInfo, client: Client) -> None:
        self._client = client
        self._info = info
        self.id = info.id
        self.files = Files(self)
        self.processes = Processes(self)
        self.sessions = Sessions(self)

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, name={self._info.name!r}, image={self._info.image!r})"

    # -- lifecycle ---------------------------------------------------------

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
               client: Optional[Client] = None, request_timeout: Optional[float] = None) -> "Sandbox":
        """Creates and starts a sandbox. memory: "256m", "1g" or bytes; ttl:
        seconds or a Go duration ("1h"); unset fields take boxd's defaults
        (image: the daemon's default image). user, read_only, tmpfs
        (["/cache:8m"]), ulimits (["nofile=4096"]), hostname: see docs/sandboxes.md,
        "Settings"; replace deletes a sandbox of the same name first.
        publish: sandbox ports (or PublishedPort) to reach from the host;
        allow: an egress network with this allowlist (None: no network);
        pull ("missing", "always") fetches the image from its registry first,
        with auth ({"username", "password"} or {"identity_token"}).
        disk: cap of the writable layer ("2g"); network: "none" or "egress"
        (allow implies egress); idle_timeout ("15m", "0": never) and on_idle
        ("pause", "delete", "checkpoint"); cpu_weight (1-10000), memory_low ("64m"),
        exec_timeout ("120s") and output_limit (bytes): defaults of exec;
        runtime: "runc" or "gvisor"; cold: never from the warm pool;
        volumes: named volumes to mount (["data:/data", "cache:/c:ro"]);
        binds: host directories to mount (["/srv/work/repo:/workspace:ro"]);
        secrets: secrets brokered at egress (["KEY", "KEY=ENVVAR"]): the
        sandbox holds placeholders (docs/secrets.md);
        auto_resume: calls restore the sandbox from its checkpoint (or resume
        it from a pause) first; on_idle "checkpoint" implies it;
        git: a public repository cloned into /workspace before this returns
        ("https://host/repo.git#v1.2"; needs network egress allowing the
        server and an image with git), git_depth its depth (0: all).
        sdk/create-options.json maps every option to its API field."""
        c = client or default_client()
        req = create_request(image, memory=memory, cpus=cpus, pids=pids, env=env, workdir=workdir, labels=labels,
                             name=name, ttl=ttl, user=user, read_only=read_only, tmpfs=tmpfs, ulimits=ulimits,
                             hostname=hostname, replace=replace, publish=publish, allow=allow, pull=pull, auth=auth,
                             disk=disk, network=network, idle_timeout=idle_timeout, on_idle=on_idle,
                             cpu_weight=cpu_weight, memory_low=memory_low, exec_timeout=exec_timeout,
                             output_limit=output_limit, runtime=runtime, cold=cold, volumes=volumes,
                             binds=binds, secrets=secrets,
                             auto_resume=auto_resume, git=git, git_depth=git_depth)
        r = c.unary(c.sandbox.CreateSandbox, req, request_timeout)
        return cls(SandboxInfo._from(r.sandbox), c)

    @classmethod
    def connect(cls, sandbox_id: str, *, client: Optional[Client] = None) -> "Sandbox":
        """Reattaches to an existing sandbox by id or name; boxd.NotFound if
        it is gone."""
        c = client or default_client()
        r = c.unary(c.sandbox.GetSandbox, boxd_pb2.GetSandboxRequest(id=sandbox_id))
        return cls(SandboxInfo._from(r.sandbox), c)

    @property
    def name(self) -> str:
        return self._info.name

    def info(self) -> SandboxInfo:
        """Fresh details, with live cgroup usage."""
        r = self._client.unary(self._client.sandbox.GetSandbox, boxd_pb2.GetSandboxRequest(id=self.id))
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    def delete(self, timeout: Union[float, str, None] = None, *, force: bool = False, background: bool = False,
               request_timeout: Optional[float] = None) -> None:
        """Deletes the sandbox and everything in it: SIGTERM to every
        process, SIGKILL after timeout (default 10 s; force: at once).
        background returns once the sandbox is no one's (gone from lists,
        its name free) and leaves the teardown to boxd."""
        req = boxd_pb2.DeleteSandboxRequest(id=self.id, timeout=duration(timeout), force=force, background=background)
        self._client.unary(self._client.sandbox.DeleteSandbox, req, request_timeout)

    def update(self, *, ttl: Union[float, str, None] = None, extend: Union[float, str, None] = None,
               memory: Union[str, int, None] = None, cpus: Optional[float] = None, pids: Optional[int] = None,
               env: Env = None, workdir: Optional[str] = None,
               request_timeout: Optional[float] = None) -> SandboxInfo:
        """Changes a running sandbox: ttl (a new lifetime from now) or extend
        (added to the expiry), limits (written to the live cgroup), env
        (merged over the environment of later commands) and workdir. Fields
        left None keep their value; everything is validated before anything
        changes."""
        req = update_request(self.id, ttl=ttl, extend=extend, memory=memory, cpus=cpus, pids=pids, env=env,
                             workdir=workdir)
        r = self._client.unary(self._client.sandbox.UpdateSandbox, req, request_timeout)
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    def stop(self, timeout: Union[float, str, None] = None, *, request_timeout: Optional[float] = None) -> SandboxInfo:
        """Stops every process (SIGTERM, then SIGKILL after timeout, default
        10 s); files are kept and start() runs the sandbox again."""
        req = boxd_pb2.StopSandboxRequest(sandbox_id=self.id, timeout=duration(timeout))
        r = self._client.unary(self._client.sandbox.StopSandbox, req, request_timeout)
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    def start(self, *, request_timeout: Optional[float] = None) -> SandboxInfo:
        """Starts a stopped sandbox again, on the same files."""
        r = self._client.unary(self._client.sandbox.StartSandbox, boxd_pb2.StartSandboxRequest(sandbox_id=self.id),
                               request_timeout)
        self._info = SandboxInfo._from(r.sandbox)
        return self._info

    def pause(self) -> None:
        """Freezes every process (cgroup freezer); commands are refused
        with FailedPrecondition until unpause()."""
        self._client.unary(self._client.sandbox.PauseSandbox, boxd_pb2.PauseSandboxRequest(id=self.id))

    def unpause(self) -> None:
        """Thaws a paused sandbox."""
        self._client.unary(self._client.sandbox.UnpauseSandbox, boxd_pb2.UnpauseSandboxRequest(id=self.id))

    resume = unpause

    def stats(self) -> SandboxStats:
        """One sample of the sandbox's resource use."""
        with self._client.stream(self._client.sandbox.Stats, boxd_pb2.StatsRequest(ids=[self.id])) as st:
            for msg in st:
                for x in msg.sandboxes:
                    return SandboxStats._from(x)
        raise errors.Unknown(f"boxd sent no stats for sandbox {self.id}")

    def stats_stream(self, interval: Union[float, str, None] = None) -> Iterator[SandboxStats]:
        """A sample every interval (default 1 s, 100 ms to 1 m) until the
        loop is left or the sandbox is gone."""
        req = boxd_pb2.StatsRequest(ids=[self.id], stream=True, interval=duration(interval))
        with self._client.stream(self._client.sandbox.Stats, req) as st:
            for msg in st:
                for x in msg.sandboxes:
                    yield SandboxStats._from(x)

    def diff(self, since: str = "create", *, patch: bool = False) -> Changes:
        """The files added, modified and deleted in the sandbox's writable
        layer since it was created ("create"), forked ("fork"), or
        committed as an image (its name); volumes are not included. patch
        adds a unified diff of each changed text file."""
        out = Changes()
        done = False
        req = diff_pb2.DiffSandboxRequest(sandbox_id=self.id, since=since, patch=patch)
        with self._client.stream(self._client.sandbox.DiffSandbox, req) as st:
            for msg in st:
                done = out._add(msg)
        if not done:
            raise errors.Unavailable(f"the diff of sandbox {self.id} ended early")
        return out

    # -- images, forks, ports, network, tar copies ----------------------------

    def commit(self, ref: str, *, message: str = "", force: bool = False,
               request_timeout: Optional[float] = None) -> Image:
        """Makes an image named ref from the sandbox's files (its image's
        layers plus its writable layer); the sandbox runs on. force replaces
        an image of that name (else AlreadyExists)."""
        req = boxd_pb2.CommitSandboxRequest(sandbox_id=self.id, ref=ref, message=message, force=force)
        return Image._from(self._client.unary(self._client.sandbox.CommitSandbox, req, request_timeout).image)

    def fork(self, count: int = 0, *, names: Sequence[str] = (), memory: Union[str, int, None] = None,
             cpus: Optional[float] = None, pids: Optional[int] = None, env: Env = None,
             workdir: Optional[str] = None, labels: Optional[Mapping[str, str]] = None,
             ttl: Union[float, str, None] = None, clone_volumes: bool = False, share_volumes: bool = False,
             with_processes: bool = False, request_timeout: Optional[float] = None) -> List["Sandbox"]:
        """Makes count new sandboxes (default one per name, or 1) whose files
        start as a copy of this one's; each runs a fresh init. Unset fields
        keep this sandbox's values. This sandbox's volumes are mounted
        read-only in the forks, unless clone_volumes (each fork gets a clone
        of each, a new volume named VOLUME-FORKID, charged to the caller) or
        share_volumes (mounted as here; only volumes created shared).
        with_processes: fork the running processes and memory too, from a
        checkpoint (see docs/checkpoint.md; refused where the runtime cannot)."""
        req = fork_request(self.id, count, names=names, memory=memory, cpus=cpus, pids=pids, env=env,
                           workdir=workdir, labels=labels, ttl=ttl, clone_volumes=clone_volumes,
                           share_volumes=share_volumes, with_processes=with_processes)
        r = self._client.unary(self._client.sandbox.ForkSandbox, req, request_timeout)
        return [Sandbox(SandboxInfo._from(x), self._client) for x in r.sandboxes]

    def publish_port(self, port: int, *, host_port: int = 0, host_ip: str = "",
                     request_timeout: Optional[float] = None) -> PublishedPort:
        """Makes the sandbox's 127.0.0.1:port reachable on the host at
        host_ip (default 127.0.0.1):host_port (0: a free port); returns the
        mapping with the host port chosen."""
        req = boxd_pb2.PublishPortRequest(sandbox_id=self.id, port=boxd_pb2.PublishedPort(
            host_ip=host_ip, host_port=host_port, port=port))
        return PublishedPort._from(self._client.unary(self._client.sandbox.PublishPort, req, request_timeout).port)

    def unpublish_port(self, port: int = 0, *, host_port: int = 0,
                       request_timeout: Optional[float] = None) -> List[PublishedPort]:
        """Stops the published ports matching port and/or host_port (0:
        any, not both), with their connections; returns what was stopped.
        NotFound if none matches."""
        req = boxd_pb2.UnpublishPortRequest(sandbox_id=self.id, port=port, host_port=host_port)
        r = self._client.unary(self._client.sandbox.UnpublishPort, req, request_timeout)
        return [PublishedPort._from(p) for p in r.ports]

    def ports(self) -> List[PublishedPort]:
        """The sandbox's published ports, as boxd has them now."""
        return self.info().ports

    def update_network(self, *, allow: Sequence[str] = (), deny: Sequence[str] = (),
                       request_timeout: Optional[float] = None) -> NetworkStatus:
        """Adds allow entries to, and removes deny entries from, an egress
        sandbox's allowlist; takes effect at once."""
        req = boxd_pb2.UpdateNetworkRequest(sandbox_id=self.id, allow=[*allow], deny=[*deny])
        r = self._client.unary(self._client.sandbox.UpdateNetwork, req, request_timeout)
        return NetworkStatus._from(r.network)

    def copy_in(self, path: str, tar: Data, *, request_timeout: Optional[float] = None) -> None:
        """Unpacks a tar stream (bytes, a file object or an iterable of bytes)
        at path in the sandbox, as ``docker cp - SANDBOX:path``."""
        self._client.unary(self._client.sandbox.CopyIn, copy_in_requests(self.id, path, tar), request_timeout)

    def copy_out_stream(self, path: str, *, request_timeout: Optional[float] = None) -> Iterator[bytes]:
        """A tar of path (a file or directory) in pieces, as they arrive."""
        req = boxd_pb2.CopyOutRequest(sandbox_id=self.id, path=path)
        with self._client.stream(self._client.sandbox.CopyOut, req, request_timeout) as st:
            for msg in st:
                if msg.data:
                    yield msg.data

    def copy_out(self, path: str, *, request_timeout: Optional[float] = None) -> bytes:
        """A tar of path (a file or directory), whole."""
        buf = io.BytesIO()
        for b in self.copy_out_stream(path, request_timeout=request_timeout):
            buf.write(b)
        return buf.getvalue()

    def stat_path(self, path: str, *, request_timeout: Optional[float] = None) -> PathStat:
        """The path as copy_in/copy_out see it (name, size, mode, is_dir,
        mtime, link target)."""
        r = self._client.unary(self._client.sandbox.StatPath, boxd_pb2.StatPathRequest(sandbox_id=self.id, path=path),
                               request_timeout)
        return PathStat._from(r)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.delete()
        except errors.NotFound:
            pass

    # -- commands ------------------------------------------------------------

    def _spec(self, args: Union[str, Sequence[str]], *, env: Env = None, workdir: Optional[str] = None,
              user: Optional[str] = None, timeout: Union[float, str, None] = None,
              stdin: Any = None, tty: bool = False, output_limit: int = 0) -> process_pb2.ProcessSpec:
        data = stdin.encode() if isinstance(stdin, str) else (bytes(stdin) if isinstance(stdin, (bytes, bytearray, memoryview)) else b"")
        return process_pb2.ProcessSpec(sandbox_id=self.id, args=argv(args), env=env_list(env), workdir=workdir or "",
                                       user=user or "", timeout=duration(timeout), tty=tty, stdin=data,
                                       output_limit=output_limit)

    def exec(self, args: Union[str, Sequence[str]], *, stdin: Stdin = None, env: Env = None,
             workdir: Optional[str] = None, user: Optional[str] = None,
             timeout: Union[float, str, None] = None, output_limit: int = 0,
             on_stdout: OnOutput = None, on_stderr: OnOutput = None,
             request_timeout: Optional[float] = None) -> ExecResult:
        """Runs a command and waits for it.

        args: a list (argv) or a string (run with ``sh -c``). timeout: seconds
        (or a Go duration) after which boxd kills the command's whole tree;
        the result then has timed_out and exit code 124. stdin: bytes, str or
        an iterable of bytes. Output is collected into the result (bytes,
        exactly as produced; at most output_limit bytes, default 16 MiB,
        then truncated), or passed to on_stdout/on_stderr as it arrives.
        request_timeout bounds the whole call: when it passes, the call is
        cancelled, boxd kills the command, and DeadlineExceeded is raised.
        """
        # One Exec message holds stdin up to a CHUNK; more goes over the
        # stream in pieces (split_stdin).
        first, rest = split_stdin(stdin, CHUNK)
        simple = (stdin is None or rest is stdin and isinstance(stdin, (bytes, bytearray, memoryview, str))) \
            and on_stdout is None and on_stderr is None and not user
        if simple:
            data = first
            req = boxd_pb2.ExecRequest(sandbox_id=self.id, args=argv(args), env=env_list(env), workdir=workdir or "",
                                       timeout=duration(timeout), stdin=data, output_limit=output_limit)
            r = self._client.unary(self._client.sandbox.Exec, req, request_timeout)
            return ExecResult._from(r.result, r.stdout, r.stderr)
        with self.exec_stream(args, stdin=stdin, env=env, workdir=workdir, user=user, timeout=timeout,
                              output_limit=output_limit, request_timeout=request_timeout) as ex:
            return ex.wait(on_stdout=on_stdout, on_stderr=on_stderr)

    def run_code(self, code: str, language: str = "python", context: Optional[str] = None,
                 timeout: Union[float, str, None] = None, *, output_limit: int = 0,
                 on_stdout: Optional[Callable[[str], None]] = None, on_stderr: Optional[Callable[[str], None]] = None,
                 request_timeout: Optional[float] = None) -> CodeResult:
        """Runs Python code in the sandbox's interpreter (an IPython kernel
        per context, made on first use; variables and imports persist
        between calls) and returns a CodeResult: stdout, stderr, the last
        expression's value and every display output as MIME bundles (a
        matplotlib figure as image/png), and the exception it raised, if
        any. timeout: seconds (or a Go duration) after which the cell is
        interrupted; the result then says timed_out and whether the context
        was restarted. on_stdout/on_stderr see output as it comes. The
        image needs python3, ipykernel and jupyter_client (failed
        precondition otherwise); see docs/interpreter.md."""
        return _code.run_code(self._client, self.id, code, language=language, context=context, timeout=timeout,
                              output_limit=output_limit, on_stdout=on_stdout, on_stderr=on_stderr,
                              request_timeout=request_timeout)

    def code_contexts(self) -> List[str]:
        """The names of the sandbox's interpreter contexts."""
        return _code.list_contexts(self._client, self.id)

    def restart_code_context(self, context: str) -> None:
        """Starts a context's kernel afresh (its state is gone)."""
        _code.restart_context(self._client, self.id, context)

    def delete_code_context(self, context: str) -> None:
        """Stops a context's kernel and forgets it."""
        _code.delete_context(self._client, self.id, context)

    def exec_stream(self, args: Union[str, Sequence[str]], *, stdin: Any = None, env: Env = None,
                    workdir: Optional[str] = None, user: Optional[str] = None,
                    timeout: Union[float, str, None] = None, output_limit: int = 0, tty: bool = False,
                    request_timeout: Optional[float] = None) -> Execution:
        """Starts a command and returns an Execution: iterate it for output as
        it is produced, then read .result. stdin: bytes/str (then EOF), an
        iterable of bytes (streamed, then EOF) or boxd.PIPE (write with
        .write(), end with .close_stdin()). Leaving the with block before the
        command ends kills it."""
        first, rest = split_stdin(stdin)
        spec = self._spec(args, env=env, workdir=workdir, user=user, timeout=timeout, stdin=first, tty=tty,
                          output_limit=output_limit)
        return Execution(self, process_pb2.ProcessInput(start=spec), rest, request_timeout)

    def exec_output(self, args: Union[str, Sequence[str]], *, stdin: Union[bytes, str, None] = None,
                    env: Env = None, workdir: Optional[str] = None, timeout: Union[float, str, None] = None,
                    output_limit: int = 0, request_timeout: Optional[float] = None) -> "OutputStream":
        """Runs a command over boxd's one-way ExecStream: iterate the result
        for Output pieces as they are produced, then read .result. stdin is
        sent whole up front (use exec_stream for interactive input).
        Leaving the with block (or close()) before the end kills it."""
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin or b"")
        req = boxd_pb2.ExecRequest(sandbox_id=self.id, args=argv(args), env=env_list(env), workdir=workdir or "",
                                   timeout=duration(timeout), stdin=data, output_limit=output_limit)
        return OutputStream(self._client.stream(self._client.sandbox.ExecStream, req, request_timeout))


class OutputStream:
    """The output of Sandbox.exec_output: iterate for Output pieces; .result
    (an ExecResult without output) is set once the command has ended."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.result: Optional[ExecResult] = None

    def __iter__(self) -> Iterator[Output]:
        for msg in self._stream:
            kind = msg.WhichOneof("event")
            if kind == "result":
                self.result = ExecResult._from(msg.result)
            elif kind is not None:
                yield Output(kind, getattr(msg, kind))

    def wait(self) -> ExecResult:
        """Reads to the end; the result with all the output collected."""
        out: dict = {"stdout": io.BytesIO(), "stderr": io.BytesIO()}
        for o in self:
            out[o.stream].write(o.data)
        if self.result is None:
            raise errors.Unknown("boxd ended the exec stream without a result")
        self.result.stdout = out["stdout"].getvalue()
        self.result.stderr = out["stderr"].getvalue()
        return self.result

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> "OutputStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def list(labels: Optional[Mapping[str, str]] = None, *, client: Optional[Client] = None) -> List[SandboxInfo]:  # noqa: A001
    """The sandboxes boxd knows (only those with all the given labels)."""
    c = client or default_client()
    r = c.unary(c.sandbox.ListSandboxes, boxd_pb2.ListSandboxesRequest(labels=dict(labels or {})))
    return [SandboxInfo._from(s) for s in r.sandboxes]


def _auth(auth: Optional[Mapping[str, str]]) -> Optional[boxd_pb2.RegistryAuth]:
    if not auth:
        return None
    unknown = set(auth) - {"username", "password", "identity_token"}
    if unknown:
        raise ValueError(f"auth: unknown keys {sorted(unknown)} (username, password, identity_token)")
    return boxd_pb2.RegistryAuth(**auth)


def _limits(memory: Union[str, int, None], cpus: Optional[float], pids: Optional[int]) -> boxd_pb2.Limits:
    return boxd_pb2.Limits(memory=str(memory) if memory is not None else "", cpus=cpus or 0, pids=pids or 0)


def _port(p: Union[int, PublishedPort]) -> boxd_pb2.PublishedPort:
    if isinstance(p, int):
        return boxd_pb2.PublishedPort(port=p)
    return boxd_pb2.PublishedPort(host_ip=p.host_ip, host_port=p.host_port, port=p.port, protocol=p.protocol)


def _size(v: Union[str, int, None]) -> str:
    return str(v) if v is not None else ""


def create_request(image: Optional[str], *, memory: Union[str, int, None], cpus: Optional[float],
                   pids: Optional[int], env: Env, workdir: Optional[str], labels: Optional[Mapping[str, str]],
                   name: Optional[str], ttl: Union[float, str, None], user: Optional[str], read_only: bool,
                   tmpfs: Sequence[str], ulimits: Sequence[str], hostname: Optional[str], replace: bool,
                   publish: Sequence[Union[int, PublishedPort]] = (), allow: Optional[Sequence[str]] = None,
                   pull: Optional[str] = None, auth: Optional[Mapping[str, str]] = None,
                   disk: Union[str, int, None] = None, network: Optional[str] = None,
                   idle_timeout: Union[float, str, None] = None, on_idle: Optional[str] = None,
                   cpu_weight: Optional[int] = None, memory_low: Union[str, int, None] = None,
                   exec_timeout: Union[float, str, None] = None, output_limit: Optional[int] = None,
                   runtime: Optional[str] = None, cold: bool = False,
                   volumes: Sequence[str] = (), binds: Sequence[str] = (),
                   secrets: Sequence[str] = (),
                   auto_resume: bool = False, git: Optional[str] = None,
                   git_depth: int = 0) -> boxd_pb2.CreateSandboxRequest:
    limits = _limits(memory, cpus, pids)
    limits.disk = _size(disk)
    req = boxd_pb2.CreateSandboxRequest(image=image or "", limits=limits, env=env_list(env),
                                        workdir=workdir or "", labels=dict(labels or {}), name=name or "",
                                        ttl=duration(ttl), user=user or "", read_only_rootfs=read_only,
                                        tmpfs=[*tmpfs], ulimits=[*ulimits], hostname=hostname or "",
                                        replace=replace, publish=[_port(p) for p in publish], pull=pull or "",
                                        idle_timeout=duration(idle_timeout), on_idle=on_idle or "",
                                        cpu_weight=cpu_weight or 0, memory_low=_size(memory_low),
                                        exec_timeout=duration(exec_timeout), output_limit=output_limit or 0,
                                        runtime=runtime or "", cold=cold, volumes=[*volumes],
                                        binds=[*binds], secrets=[*secrets], git=git or "", git_depth=git_depth)
    req.auto_resume = auto_resume
    if allow is not None or network:
        # allow alone means egress; network="none" with an allowlist is
        # left for boxd to refuse, naming the field.
        req.network.CopyFrom(boxd_pb2.NetworkRequest(mode=network or "egress", allow=[*(allow or ())]))
    a = _auth(auth)
    if a is not None:
        req.registry_auth.CopyFrom(a)
    return req


def fork_request(sandbox_id: str, count: int, *, names: Sequence[str], memory: Union[str, int, None],
                 cpus: Optional[float], pids: Optional[int], env: Env, workdir: Optional[str],
                 labels: Optional[Mapping[str, str]], ttl: Union[float, str, None], clone_volumes: bool = False,
                 share_volumes: bool = False, with_processes: bool = False) -> boxd_pb2.ForkSandboxRequest:
    return boxd_pb2.ForkSandboxRequest(sandbox_id=sandbox_id, count=count, names=[*names],
                                       limits=_limits(memory, cpus, pids), env=env_list(env), workdir=workdir or "",
                                       labels=dict(labels or {}), ttl=duration(ttl), clone_volumes=clone_volumes,
                                       share_volumes=share_volumes, with_processes=with_processes)


_COPY_DATA = boxd_pb2.CopyInRequest.DESCRIPTOR.fields_by_name["data"].number


def copy_in_requests(sandbox_id: str, path: str, tar: Data) -> Iterator[Any]:
    """The CopyIn stream: the destination, then the tar bytes in 1 MiB
    messages (pre-encoded, no copy into a message object)."""
    yield boxd_pb2.CopyInRequest(sandbox_id=sandbox_id, path=path)
    for c in _chunks(tar):
        yield _wire.data_message(_COPY_DATA, c)


def update_request(sandbox_id: str, *, ttl: Union[float, str, None], extend: Union[float, str, None],
                   memory: Union[str, int, None], cpus: Optional[float], pids: Optional[int], env: Env,
                   workdir: Optional[str]) -> boxd_pb2.UpdateSandboxRequest:
    limits = boxd_pb2.Limits(memory=str(memory) if memory is not None else "", cpus=cpus or 0, pids=pids or 0)
    return boxd_pb2.UpdateSandboxRequest(sandbox_id=sandbox_id, ttl=duration(ttl), extend=duration(extend),
                                         limits=limits, env=env_list(env), workdir=workdir or "")


def events(since: Optional[str] = None, *, filters: Sequence[str] = (), follow: bool = False,
           client: Optional[Client] = None) -> Iterator[Event]:
    """boxd's event log (what `boxctl events` shows): since (an
    RFC 3339 time, or a Go duration meaning that long ago, such as "10m";
    None: only new events), filters
    ("type=created", "sandbox=ID", as boxctl's --filter); follow keeps
    yielding new events as they happen until the loop is left."""
    c = client or default_client()
    req = events_pb2.EventsRequest(since=since or "", filters=[*filters], follow=follow)
    with c.stream(c.events.Events, req) as st:
        for msg in st:
            if msg.HasField("event"):
                yield Event._from(msg.event)


__all__ = ["Sandbox", "OutputStream", "list", "events", "PIPE"]
