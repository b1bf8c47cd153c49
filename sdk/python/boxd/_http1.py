"""File reads in the Connect protocol over HTTP/1.1 on boxd's Unix socket,
with the standard library only.

Why: through grpcio a 100 MiB read ran at 130-650 MiB/s from one run to
the next (`make bench`, scenario sdk), and the Python process was busy the
whole time: grpc's core hands each 1 MiB message over in memory freshly
allocated, and glibc gives such blocks back to the kernel and gets them
again, so every message costs about 256 page faults of zeroed memory (up
to 23,000 faults and 630 ms of CPU for one 100 MiB read; with malloc told
to keep its memory the same read took 45 ms of CPU). Here the response is
received with recv_into into one buffer per connection that is reused for
every message, so a read allocates nothing per message and runs no thread
of its own. The same parser serves boxd.Client (blocking sockets, Pool)
and boxd.aio.Client (the event loop's sock_recv_into, AsyncPool).

boxd serves the Connect protocol over HTTP/1.1 on the same socket (Go's
net/http): a server-streaming call is a POST whose body is one enveloped
request (a flags byte, a 4-byte big-endian length, the message); the
answer is a body of such envelopes, the last one flagged end-of-stream and
carrying JSON with the error, if any. The deadline goes to boxd as
Connect-Timeout-Ms (boxd cancels the work) and is enforced here too; a call
left early (closed, broken out of, timed out) closes its connection, which
makes boxd cancel the call's context like an HTTP/2 reset. A connection
whose answer was read to its end is kept (at most MAX_IDLE per Client) for
the next call.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from typing import Any, AsyncIterator, Generator, Iterator, List, Optional, Tuple

from . import errors

# Largest message accepted from boxd; boxd sends file data in 1 MiB
# messages and refuses to send messages above 8 MiB.
MAX_MESSAGE = 16 << 20
# Idle connections kept per Client, and for how long (well below boxd's
# --conn-idle-timeout, 5 minutes by default).
MAX_IDLE = 4
IDLE_SECONDS = 20.0
# Longest status line, header line or chunk-size line accepted, and the
# largest error body of a non-200 answer.
_MAX_LINE = 64 << 10
_MAX_ERROR_BODY = 64 << 10
# The buffer for header lines, chunk-size lines and envelope prefixes;
# message bodies bigger than a small read go straight into the message
# buffer.
_SMALL = 64 << 10
_DIRECT = 16 << 10

_LENGTH, _CHUNKED, _CLOSE = 0, 1, 2
_END_STREAM = 0x02
_COMPRESSED = 0x01


class _Deadline(Exception):
    """The call's own deadline passed (raised inside, mapped outside)."""


class _Closed(Exception):
    """boxd closed the connection before the answer ended."""


def _malformed(what: str) -> errors.BoxdError:
    return errors.Internal(f"malformed answer from boxd: {what}")


class _Conn:
    """One HTTP/1.1 connection, one call at a time. The answer is parsed by
    generators that yield the view they need filled and get back how many
    bytes were received into it (0: the connection ended), so the same code
    serves the blocking client and the asyncio one (see _recv_sync and
    _recv_async, the drivers)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray(_SMALL)
        self.view = memoryview(self.buf)
        self.r = self.w = 0
        self.msg = bytearray(0)  # the message buffer, kept for the next call
        self.used = time.monotonic()
        self.got_bytes = False  # anything received for the current call
        self.mode = _LENGTH
        self.left = 0
        self.chunk_started = False
        self.body_done = False
        self.keep = True
        self.ended = False  # the answer was read to its end message

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def stale(self) -> bool:
        """True if boxd closed the idle connection (or sent something
        nobody asked for): it must not carry a call."""
        try:
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True  # b"" (closed) or unprompted bytes

    def start(self) -> None:
        """Resets the answer's state for a new call."""
        self.r = self.w = 0
        self.got_bytes = False
        self.mode, self.left, self.chunk_started, self.body_done, self.keep = _LENGTH, 0, False, False, True
        self.ended = False

    # -- parsing (generators: yield a view to fill, get the count back) ---------

    def _fill(self) -> Generator[memoryview, int, None]:
        """Receives more into the small buffer; _Closed at the end."""
        if self.r == self.w:
            self.r = self.w = 0
        elif self.w == len(self.buf):
            if self.r == 0:
                raise _malformed("a line is too long")
            n = self.w - self.r
            self.buf[:n] = self.buf[self.r:self.w]
            self.r, self.w = 0, n
        n = yield self.view[self.w:]
        if n == 0:
            raise _Closed()
        self.got_bytes = True
        self.w += n

    def _line(self) -> Generator[memoryview, int, bytes]:
        """The next line without its CRLF (or LF)."""
        start = self.r
        while True:
            i = self.buf.find(b"\n", start, self.w)
            if i >= 0:
                line = bytes(self.buf[self.r:i])
                self.r = i + 1
                return line[:-1] if line.endswith(b"\r") else line
            if self.w - self.r > _MAX_LINE:
                raise _malformed("a line is too long")
            off = self.w - self.r
            yield from self._fill()
            start = self.r + off

    def head(self) -> Generator[memoryview, int, Tuple[int, dict]]:
        """The status and headers (names in lower case); interim 1xx answers
        are skipped. Sets up the body's framing."""
        while True:
            status_line = yield from self._line()
            parts = status_line.split(b" ", 2)
            if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or not parts[1].isdigit() \
                    or len(parts[1]) != 3:
                raise _malformed(f"not an HTTP/1.1 status line: {status_line[:40]!r}")
            status = int(parts[1])
            headers: dict = {}
            size = 0
            while True:
                line = yield from self._line()
                if not line:
                    break
                size += len(line)
                if size > _MAX_LINE:
                    raise _malformed("too long a header")
                name, colon, value = line.partition(b":")
                if not colon or not name.strip():
                    raise _malformed("a malformed header line")
                k = name.strip().decode("latin-1").lower()
                v = value.strip().decode("latin-1")
                headers[k] = f"{headers[k]}, {v}" if k in headers else v
            if 100 <= status < 200:
                continue
            conn = headers.get("connection", "").lower()
            self.keep = "close" not in conn if parts[0] == b"HTTP/1.1" else "keep-alive" in conn
            te = headers.get("transfer-encoding")
            cl = headers.get("content-length")
            self.body_done = False
            if te is not None:
                if te.lower() != "chunked":
                    raise _malformed(f"transfer-encoding {te!r}")
                self.mode, self.left, self.chunk_started = _CHUNKED, 0, False
            elif cl is not None:
                if not cl.isdigit() or len(cl) > 15:
                    raise _malformed(f"content-length {cl!r}")
                self.mode, self.left = _LENGTH, int(cl)
            elif status in (204, 304):
                self.mode, self.left = _LENGTH, 0
            else:
                self.mode, self.keep = _CLOSE, False
            return status, headers

    def _next_chunk(self) -> Generator[memoryview, int, None]:
        """Reads the next chunk's size line (after the previous chunk's
        CRLF); the last chunk's trailers too."""
        if self.chunk_started and (yield from self._line()) != b"":
            raise _malformed("no CRLF after a chunk")
        self.chunk_started = True
        size = (yield from self._line()).split(b";", 1)[0].strip()
        if not size or len(size) > 8 or any(c not in b"0123456789abcdefABCDEF" for c in size):
            raise _malformed(f"bad chunk size {size[:20]!r}")
        self.left = int(size, 16)
        if self.left == 0:
            while (yield from self._line()):  # trailers, up to the empty line
                pass
            self.body_done = True

    def body_into(self, v: memoryview) -> Generator[memoryview, int, int]:
        """Reads up to len(v) bytes of the body into v; 0 at its end."""
        if self.body_done:
            return 0
        if self.mode == _CHUNKED:
            if self.left == 0:
                yield from self._next_chunk()
                if self.body_done:
                    return 0
            k = min(len(v), self.left)
        elif self.mode == _LENGTH:
            if self.left == 0:
                self.body_done = True
                return 0
            k = min(len(v), self.left)
        else:
            k = len(v)
        avail = self.w - self.r
        if not avail and k < _DIRECT:
            try:
                yield from self._fill()
            except _Closed:
                if self.mode != _CLOSE:
                    raise
                self.body_done = True
                return 0
            avail = self.w - self.r
        if avail:
            k = min(k, avail)
            v[:k] = self.view[self.r:self.r + k]
            self.r += k
        else:
            # A big read goes straight into the caller's buffer.
            k = yield v[:k]
            if k == 0:
                if self.mode != _CLOSE:
                    raise _Closed()
                self.body_done = True
                return 0
            self.got_bytes = True
        if self.mode != _CLOSE:
            self.left -= k
        return k

    def read_exact(self, v: memoryview) -> Generator[memoryview, int, bool]:
        """Fills v from the body; False if the body ended before any of it,
        a malformed-answer error if it ended inside."""
        pos, n = 0, len(v)
        while pos < n:
            k = yield from self.body_into(v[pos:])
            if k == 0:
                if pos == 0:
                    return False
                raise _malformed("the answer ended inside a message")
            pos += k
        return True

    def read_rest(self, limit: int, what: str) -> Generator[memoryview, int, bytes]:
        """The rest of the body (at most limit bytes, else an error)."""
        out = bytearray()
        chunk = memoryview(bytearray(8192))
        while True:
            k = yield from self.body_into(chunk)
            if k == 0:
                return bytes(out)
            out += chunk[:k]
            if len(out) > limit:
                raise _malformed(what)

    def messages(self, socket_path: str) -> Generator[Any, int, None]:
        """The whole answer to a server-streaming call, after the request
        was sent: yields views to fill (as above) and, for each response
        message, the tuple (view of the message,), valid until the next
        thing is asked for. Ends after a clean end message; raises the
        call's error otherwise."""
        status, headers = yield from self.head()
        if status != 200:
            body = yield from self.read_rest(_MAX_ERROR_BODY, f"an error body over {_MAX_ERROR_BODY} bytes")
            self.keep = False
            raise _http_error(status, headers, body, socket_path)
        ct = headers.get("content-type", "").lower()
        if not ct.startswith("application/connect+proto"):
            raise _malformed(f"content-type {ct!r}")
        enc = headers.get("connect-content-encoding", "identity").lower()
        if enc != "identity":
            raise _malformed(f"compressed with {enc!r}, which was not asked for")
        prefix = memoryview(bytearray(5))
        while True:
            if not (yield from self.read_exact(prefix)):
                raise _malformed("the stream ended without its end message")
            flags = prefix[0]
            n = int.from_bytes(prefix[1:5], "big")
            if n > MAX_MESSAGE:
                raise _malformed(f"a message of {n} bytes (the limit is {MAX_MESSAGE})")
            if flags & _COMPRESSED:
                raise _malformed("a compressed message, which was not asked for")
            if flags & ~(_COMPRESSED | _END_STREAM):
                raise _malformed(f"unknown envelope flags {flags:#x}")
            if len(self.msg) < n:
                self.msg = bytearray(max(n, 1 << 20) + 64)
            mv = memoryview(self.msg)[:n]
            if n and not (yield from self.read_exact(mv)):
                raise _malformed("the answer ended inside a message")
            if flags & _END_STREAM:
                err = _end_error(mv, socket_path)
                yield from self.read_rest(0, "bytes after the end of the stream")
                self.ended = True  # even with an error: the connection can carry the next call
                if err is not None:
                    raise err
                return
            yield (mv,)

    # -- the drivers ---------------------------------------------------------------

    def recv_sync(self, v: memoryview, deadline: Optional[float]) -> int:
        if deadline is not None:
            rem = deadline - time.monotonic()
            if rem <= 0:
                raise _Deadline()
            self.sock.settimeout(rem)
        try:
            return self.sock.recv_into(v)
        except socket.timeout:
            raise _Deadline() from None

    async def recv_async(self, v: memoryview, deadline: Optional[float]) -> int:
        loop = asyncio.get_running_loop()
        if deadline is None:
            return await loop.sock_recv_into(self.sock, v)
        rem = deadline - time.monotonic()
        if rem <= 0:
            raise _Deadline()
        try:
            return await asyncio.wait_for(loop.sock_recv_into(self.sock, v), rem)
        except asyncio.TimeoutError:
            raise _Deadline() from None


def _http_error(status: int, headers: dict, body: bytes, socket_path: str) -> errors.BoxdError:
    code = _HTTP_CODES.get(status, "unknown")
    message = f"HTTP {status}"
    if headers.get("content-type", "").lower().startswith("application/json"):
        try:
            j = json.loads(body)
            code, message = str(j.get("code") or code), str(j.get("message") or message)
        except (ValueError, AttributeError):
            pass
    return errors.from_connect(code, message, socket_path)


def _end_error(msg: memoryview, socket_path: str) -> Optional[errors.BoxdError]:
    try:
        j = json.loads(bytes(msg)) if len(msg) else {}
    except ValueError:
        raise _malformed("the end message is not JSON") from None
    if not isinstance(j, dict):
        raise _malformed("the end message is not a JSON object")
    e: Any = j.get("error")
    if e is None:
        return None
    if not isinstance(e, dict):
        raise _malformed("the end message's error is not an object")
    return errors.from_connect(str(e.get("code") or "unknown"), str(e.get("message") or ""), socket_path)


# Connect's HTTP status mapping for answers that are not 200 (an HTTP-level
# failure before the call started).
_HTTP_CODES = {400: "internal", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
               429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable"}


def _request(path: str, request: bytes, timeout: Optional[float]) -> bytes:
    head = (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: boxd-sdk-python\r\n"
            "Content-Type: application/connect+proto\r\nConnect-Protocol-Version: 1\r\n"
            f"Content-Length: {len(request) + 5}\r\n")
    if timeout is not None:
        head += f"Connect-Timeout-Ms: {min(max(1, int(timeout * 1000 + 0.999)), 9_999_999_999)}\r\n"
    return head.encode("latin-1") + b"\r\n" + bytes([0]) + len(request).to_bytes(4, "big") + request


class _Pool:
    """The idle connections of one Client (shared by both drivers)."""

    def __init__(self, socket_path: str) -> None:
        self.socket = socket_path
        self._idle: List[_Conn] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._busy = 0
        self._closed = False

    def open_calls(self) -> int:
        """Calls in progress (for tests: an abandoned call must not stay)."""
        return self._busy

    def idle_connections(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
        for c in idle:
            c.close()

    def _take(self) -> Optional[_Conn]:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's connections are the parent's
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                c = self._idle.pop()
                if time.monotonic() - c.used < IDLE_SECONDS and not c.stale():
                    return c
                c.close()
        return None

    def _done(self, c: Optional[_Conn]) -> None:
        """A call ends: its connection is kept if its answer was read to the
        end, else closed (which makes boxd cancel the call)."""
        with self._lock:
            self._busy -= 1
            if c is None:
                return
            if c.ended and c.keep and c.body_done and c.r == c.w and not self._closed and self._pid == os.getpid() \
                    and len(self._idle) < MAX_IDLE:
                c.used = time.monotonic()
                self._idle.append(c)
                return
        c.close()

    def _begin(self) -> None:
        with self._lock:
            self._busy += 1

    def _error(self, e: BaseException) -> BaseException:
        """The typed exception for what went wrong inside a call."""
        if isinstance(e, errors.BoxdError):
            return e  # some are OSErrors too (PermissionDenied, Unavailable)
        if isinstance(e, (_Deadline, socket.timeout)):
            return errors.DeadlineExceeded("the call's request_timeout passed (boxd cancelled its work)")
        if isinstance(e, _Closed):
            return errors.Unavailable(f"boxd is not reachable on {self.socket}: "
                                      "boxd closed the connection before the call ended")
        if isinstance(e, OSError):
            return errors.Unavailable(f"boxd is not reachable on {self.socket}: {e}")
        return e


class Pool(_Pool):
    """HTTP/1.1 server-streaming calls of the blocking Client."""

    def _dial(self, deadline: Optional[float]) -> _Conn:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if deadline is not None:
                s.settimeout(max(deadline - time.monotonic(), 0.001))
            s.connect(self.socket)
        except socket.timeout:
            s.close()
            raise _Deadline() from None
        except OSError:
            s.close()
            raise
        return _Conn(s)

    def server_stream(self, path: str, request: bytes, timeout: Optional[float]) -> Iterator[memoryview]:
        """Calls a server-streaming method: yields each response message as
        a view of the connection's buffer, valid until the next one is
        asked for. Errors come as the typed exceptions of boxd.errors."""
        deadline = None if timeout is None else time.monotonic() + timeout
        wire = _request(path, request, timeout)
        conn: Optional[_Conn] = None
        self._begin()
        try:
            conn = self._take()
            reused = conn is not None
            while True:
                if conn is None:
                    conn = self._dial(deadline)
                conn.start()
                try:
                    if deadline is not None:
                        rem = deadline - time.monotonic()
                        if rem <= 0:
                            raise _Deadline()
                        conn.sock.settimeout(rem)
                    else:
                        conn.sock.settimeout(None)
                    conn.sock.sendall(wire)
                    parse = conn.messages(self.socket)
                    want = next(parse)
                    while isinstance(want, memoryview):  # the head: no message yet
                        want = parse.send(conn.recv_sync(want, deadline))
                    break
                except StopIteration:
                    return
                except (_Closed, OSError) as e:
                    if isinstance(e, (errors.BoxdError, socket.timeout)) or not reused or conn.got_bytes:
                        raise
                    # A kept connection boxd had closed: the request started
                    # nothing; it goes once more on a new connection.
                    conn.close()
                    conn, reused = None, False
            while True:
                if isinstance(want, memoryview):
                    n = conn.recv_sync(want, deadline)
                else:
                    yield want[0]
                    n = 0
                want = parse.send(n)
        except StopIteration:
            pass
        except (_Deadline, _Closed, OSError) as e:
            raise self._error(e) from None
        finally:
            self._done(conn)


class AsyncPool(_Pool):
    """HTTP/1.1 server-streaming calls of boxd.aio.Client, on the running
    event loop (non-blocking sockets, loop.sock_recv_into)."""

    async def _dial(self, deadline: Optional[float]) -> _Conn:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            if deadline is None:
                await loop.sock_connect(s, self.socket)
            else:
                await asyncio.wait_for(loop.sock_connect(s, self.socket), max(deadline - time.monotonic(), 0.001))
        except asyncio.TimeoutError:
            s.close()
            raise _Deadline() from None
        except BaseException:
            s.close()
            raise
        return _Conn(s)

    async def _send(self, conn: _Conn, wire: bytes, deadline: Optional[float]) -> None:
        loop = asyncio.get_running_loop()
        if deadline is None:
            await loop.sock_sendall(conn.sock, wire)
            return
        rem = deadline - time.monotonic()
        if rem <= 0:
            raise _Deadline()
        try:
            await asyncio.wait_for(loop.sock_sendall(conn.sock, wire), rem)
        except asyncio.TimeoutError:
            raise _Deadline() from None

    async def server_stream(self, path: str, request: bytes, timeout: Optional[float]) -> AsyncIterator[memoryview]:
        """Pool.server_stream, awaited; leaving it early (aclose, task
        cancelled) closes the connection, which cancels the call in boxd."""
        deadline = None if timeout is None else time.monotonic() + timeout
        wire = _request(path, request, timeout)
        conn: Optional[_Conn] = None
        self._begin()
        try:
            conn = self._take()
            reused = conn is not None
            while True:
                if conn is None:
                    conn = await self._dial(deadline)
                conn.start()
                try:
                    await self._send(conn, wire, deadline)
                    parse = conn.messages(self.socket)
                    want = next(parse)
                    while isinstance(want, memoryview):
                        want = parse.send(await conn.recv_async(want, deadline))
                    break
                except StopIteration:
                    return
                except (_Closed, OSError) as e:
                    if isinstance(e, (errors.BoxdError, socket.timeout)) or not reused or conn.got_bytes:
                        raise
                    conn.close()
                    conn, reused = None, False
            while True:
                if isinstance(want, memoryview):
                    n = await conn.recv_async(want, deadline)
                else:
                    yield want[0]
                    n = 0
                want = parse.send(n)
        except StopIteration:
            pass
        except (_Deadline, _Closed, OSError) as e:
            raise self._error(e) from None
        finally:
            self._done(conn)
