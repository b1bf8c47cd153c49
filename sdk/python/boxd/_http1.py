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
of its own.

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

import json
import os
import socket
import threading
import time
from typing import Any, Iterator, List, Optional, Tuple

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
    """One HTTP/1.1 connection, one call at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray(_SMALL)
        self.view = memoryview(self.buf)
        self.r = self.w = 0
        self.msg = bytearray(0)  # the message buffer, kept for the next call
        self.used = time.monotonic()
        self.deadline: Optional[float] = None
        self.got_bytes = False  # anything received for the current call
        self.mode = _LENGTH
        self.left = 0
        self.chunk_started = False
        self.body_done = False
        self.keep = True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def stale(self) -> bool:
        """True if boxd closed the idle connection (or sent something
        nobody asked for): it must not carry a call."""
        try:
            b = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True  # b"" (closed) or unprompted bytes

    # -- receiving ---------------------------------------------------------------

    def _recv_into(self, v: memoryview) -> int:
        if self.deadline is not None:
            rem = self.deadline - time.monotonic()
            if rem <= 0:
                raise _Deadline()
            self.sock.settimeout(rem)
        try:
            n = self.sock.recv_into(v)
        except socket.timeout:
            raise _Deadline() from None
        if n:
            self.got_bytes = True
        return n

    def _fill(self) -> None:
        """Receives more into the small buffer; _Closed at the end."""
        if self.r == self.w:
            self.r = self.w = 0
        elif self.w == len(self.buf):
            if self.r == 0:
                raise _malformed("a line is too long")
            n = self.w - self.r
            self.buf[:n] = self.buf[self.r:self.w]
            self.r, self.w = 0, n
        n = self._recv_into(self.view[self.w:])
        if n == 0:
            raise _Closed()
        self.w += n

    def _line(self) -> bytes:
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
            self._fill()
            start = self.r + off

    def head(self) -> Tuple[int, dict]:
        """The status and headers (names in lower case); interim 1xx answers
        are skipped. Sets up the body's framing."""
        while True:
            status_line = self._line()
            parts = status_line.split(b" ", 2)
            if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or not parts[1].isdigit() \
                    or len(parts[1]) != 3:
                raise _malformed(f"not an HTTP/1.1 status line: {status_line[:40]!r}")
            status = int(parts[1])
            headers: dict = {}
            size = 0
            while True:
                line = self._line()
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

    def _next_chunk(self) -> None:
        """Reads the next chunk's size line (after the previous chunk's
        CRLF); the last chunk's trailers too."""
        if self.chunk_started and self._line() != b"":
            raise _malformed("no CRLF after a chunk")
        self.chunk_started = True
        size = self._line().split(b";", 1)[0].strip()
        if not size or len(size) > 8 or any(c not in b"0123456789abcdefABCDEF" for c in size):
            raise _malformed(f"bad chunk size {size[:20]!r}")
        self.left = int(size, 16)
        if self.left == 0:
            while self._line():  # trailers, up to the empty line
                pass
            self.body_done = True

    def body_into(self, v: memoryview) -> int:
        """Reads up to len(v) bytes of the body into v; 0 at its end."""
        if self.body_done:
            return 0
        if self.mode == _CHUNKED:
            if self.left == 0:
                self._next_chunk()
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
                self._fill()
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
            k = self._recv_into(v[:k])
            if k == 0:
                if self.mode != _CLOSE:
                    raise _Closed()
                self.body_done = True
                return 0
        if self.mode != _CLOSE:
            self.left -= k
        return k

    def read_exact(self, v: memoryview) -> bool:
        """Fills v from the body; False if the body ended before any of it,
        a malformed-answer error if it ended inside."""
        pos, n = 0, len(v)
        while pos < n:
            k = self.body_into(v[pos:])
            if k == 0:
                if pos == 0:
                    return False
                raise _malformed("the answer ended inside a message")
            pos += k
        return True

    def read_rest(self, limit: int, what: str) -> bytes:
        """The rest of the body (at most limit bytes, else an error)."""
        out = bytearray()
        chunk = memoryview(bytearray(8192))
        while True:
            k = self.body_into(chunk)
            if k == 0:
                return bytes(out)
            out += chunk[:k]
            if len(out) > limit:
                raise _malformed(what)


# Connect's HTTP status mapping for answers that are not 200 (an HTTP-level
# failure before the call started).
_HTTP_CODES = {400: "internal", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
               429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable"}


class Pool:
    """The HTTP/1.1 connections of one Client, for server-streaming calls."""

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

    def _take(self) -> Tuple[Optional[_Conn], bool]:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's connections are the parent's
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                c = self._idle.pop()
                if time.monotonic() - c.used < IDLE_SECONDS and not c.stale():
                    return c, True
                c.close()
        return None, False

    def _put(self, c: _Conn) -> None:
        c.used = time.monotonic()
        c.deadline = None
        c.sock.settimeout(None)
        with self._lock:
            if not self._closed and self._pid == os.getpid() and len(self._idle) < MAX_IDLE:
                self._idle.append(c)
                return
        c.close()

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

    def _unavailable(self, what: object) -> errors.BoxdError:
        return errors.Unavailable(f"boxd is not reachable on {self.socket}: {what}")

    def server_stream(self, path: str, request: bytes, timeout: Optional[float]) -> Iterator[memoryview]:
        """Calls a server-streaming method: yields each response message as
        a view of the connection's buffer, valid until the next one is
        asked for. Errors come as the typed exceptions of boxd.errors."""
        deadline = None if timeout is None else time.monotonic() + timeout
        head = (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: boxd-sdk-python\r\n"
                "Content-Type: application/connect+proto\r\nConnect-Protocol-Version: 1\r\n"
                f"Content-Length: {len(request) + 5}\r\n")
        if timeout is not None:
            head += f"Connect-Timeout-Ms: {min(max(1, int(timeout * 1000 + 0.999)), 9_999_999_999)}\r\n"
        wire = head.encode("latin-1") + b"\r\n" + bytes([0]) + len(request).to_bytes(4, "big") + request
        conn: Optional[_Conn] = None
        done = False
        with self._lock:
            self._busy += 1
        try:
            try:
                conn, status, headers = self._send(wire, deadline)
                if status != 200:
                    raise self._http_error(conn, status, headers)
                ct = headers.get("content-type", "").lower()
                if not ct.startswith("application/connect+proto"):
                    raise _malformed(f"content-type {ct!r}")
                enc = headers.get("connect-content-encoding", "identity").lower()
                if enc != "identity":
                    raise _malformed(f"compressed with {enc!r}, which was not asked for")
                prefix = memoryview(bytearray(5))
                while True:
                    if not conn.read_exact(prefix):
                        raise _malformed("the stream ended without its end message")
                    flags = prefix[0]
                    n = int.from_bytes(prefix[1:5], "big")
                    if n > MAX_MESSAGE:
                        raise _malformed(f"a message of {n} bytes (the limit is {MAX_MESSAGE})")
                    if flags & _COMPRESSED:
                        raise _malformed("a compressed message, which was not asked for")
                    if flags & ~(_COMPRESSED | _END_STREAM):
                        raise _malformed(f"unknown envelope flags {flags:#x}")
                    if len(conn.msg) < n:
                        conn.msg = bytearray(max(n, 1 << 20) + 64)
                    mv = memoryview(conn.msg)[:n]
                    if n and not conn.read_exact(mv):
                        raise _malformed("the answer ended inside a message")
                    if flags & _END_STREAM:
                        err = self._end_error(mv)
                        conn.read_rest(0, "bytes after the end of the stream")
                        done = True
                        if err is not None:
                            raise err
                        return
                    yield mv
            except errors.BoxdError:
                raise  # some are OSErrors too (PermissionDenied, Unavailable)
            except _Deadline:
                raise errors.DeadlineExceeded("the call's request_timeout passed (boxd cancelled its work)") from None
            except _Closed:
                raise self._unavailable("boxd closed the connection before the call ended") from None
            except OSError as e:
                raise self._unavailable(e) from None
        finally:
            with self._lock:
                self._busy -= 1
            if conn is not None:
                if done and conn.keep and conn.body_done:
                    self._put(conn)
                else:
                    # Left early or broken: closing makes boxd cancel the call.
                    conn.close()

    def _send(self, wire: bytes, deadline: Optional[float]) -> Tuple[_Conn, int, dict]:
        """Sends the request on a kept connection (or a new one) and reads
        the answer's head. A kept connection that boxd closed meanwhile
        fails before any answer; the call then goes once more on a new
        connection (the request did not start anything)."""
        conn, reused = self._take()
        while True:
            if conn is None:
                conn = self._dial(deadline)
            conn.deadline = deadline
            conn.got_bytes = False
            try:
                if deadline is not None:
                    rem = deadline - time.monotonic()
                    if rem <= 0:
                        raise _Deadline()
                    conn.sock.settimeout(rem)
                try:
                    conn.sock.sendall(wire)
                except socket.timeout:
                    raise _Deadline() from None
                status, headers = conn.head()
                return conn, status, headers
            except errors.BoxdError:
                conn.close()
                raise
            except (_Closed, OSError):
                conn.close()
                if reused and not conn.got_bytes:
                    conn, reused = None, False
                    continue
                raise
            except BaseException:
                conn.close()
                raise

    def _http_error(self, conn: _Conn, status: int, headers: dict) -> errors.BoxdError:
        body = conn.read_rest(_MAX_ERROR_BODY, f"an error body over {_MAX_ERROR_BODY} bytes")
        conn.keep = False
        code = _HTTP_CODES.get(status, "unknown")
        message = f"HTTP {status}"
        if headers.get("content-type", "").lower().startswith("application/json"):
            try:
                j = json.loads(body)
                code, message = str(j.get("code") or code), str(j.get("message") or message)
            except (ValueError, AttributeError):
                pass
        return errors.from_connect(code, message, self.socket)

    def _end_error(self, msg: memoryview) -> Optional[errors.BoxdError]:
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
        return errors.from_connect(str(e.get("code") or "unknown"), str(e.get("message") or ""), self.socket)
