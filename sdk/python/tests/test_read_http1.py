"""File reads over HTTP/1.1 in the Connect protocol (boxd/_http1.py).

ReadHTTP1Test (sync) and AioReadHTTP1Test (boxd.aio) run against the real
boxd: exact bytes at every size that matters to the framing, errors typed
exactly as over gRPC, deadlines, and calls left early, checked on boxd's
side (its end of the connection goes). HostileAnswerTest plays a hostile or broken daemon on a socket of its own:
answers boxd never sends (oversized, cut, malformed, stalled) must give a
clear typed error, never a hang or a wrong result.
"""

import asyncio
import io
import os
import socket
import tempfile
import threading
import time
import unittest
from typing import Callable, List

import support  # noqa: F401  (puts the SDK on sys.path)
from support import IMAGE, LABELS, SandboxTest, boxd
import boxd.aio as aio
from boxd import _client, files
from boxd.v1 import files_pb2

MiB = 1 << 20


def boxd_connections() -> int:
    """Connections boxd holds on its socket right now, seen from its side:
    accepted sockets carry the listener's path in /proc/net/unix until boxd
    closes them (so a call boxd still serves keeps its line)."""
    path = os.path.abspath(os.environ["BOXD_SOCKET"])
    n = 0
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            # Num RefCount Protocol Flags Type St Inode Path; St 01: listening
            if len(parts) >= 8 and parts[7] == path and parts[5] != "01":
                n += 1
    return n


def until(cond: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


class ReadHTTP1Test(SandboxTest):
    def test_exact_bytes_every_size(self) -> None:
        f = self.sb.files
        # 0, 1, around the envelope and 64 KiB buffer, around boxd's 1 MiB
        # messages, and several messages.
        for size in (0, 1, 5, 6, 65535, 65536, 65537, MiB - 1, MiB, MiB + 1, 3 * MiB + 12345):
            data = os.urandom(size)
            f.write("/tmp/r.bin", data)
            self.assertEqual(f.read("/tmp/r.bin"), data, size)
            out = io.BytesIO()
            self.assertEqual(f.read_into("/tmp/r.bin", out), size)
            self.assertEqual(out.getvalue(), data, size)
            self.assertEqual(b"".join(f.read_stream("/tmp/r.bin")), data, size)
        data = os.urandom(3 * MiB + 7)
        f.write("/tmp/r.bin", data)
        for off, ln in ((0, 1), (1, 0), (MiB - 3, 10), (MiB, MiB), (2 * MiB + 1, 0), (len(data) - 1, 5),
                        (len(data), 0), (len(data) + 10, 3)):
            self.assertEqual(f.read("/tmp/r.bin", offset=off, length=ln), data[off:off + ln if ln else None],
                             (off, ln))
        # The reads went over HTTP/1.1, one connection kept and reused.
        self.assertEqual(self.sb._client.http1.idle_connections(), 1)
        self.assertEqual(self.sb._client.http1.open_calls(), 0)

    def test_download_many(self) -> None:
        a, b = os.urandom(MiB + 3), os.urandom(10)
        self.sb.files.upload({"/tmp/dl/a": a, "/tmp/dl/b": b}, parents=True)
        got = self.sb.files.download(["/tmp/dl/a", "/tmp/dl/missing", "/tmp/dl/b"])
        self.assertEqual((got[0].data, got[2].data), (a, b))
        self.assertIsInstance(got[1].error, boxd.NotFound)

    def test_errors_typed_as_over_grpc(self) -> None:
        self.sb.files.write("/tmp/secret", b"s", mode=0o600)
        cases = [("/no/such/file", {}), ("/tmp/a\x00b", {}), ("/tmp", {}), ("/tmp/secret", {"user": "65534"}),
                 ("/etc/hostname", {"offset": -1}), ("/etc/hostname", {"length": -3})]
        c = self.sb._client
        for path, kw in cases:
            with self.assertRaises(boxd.BoxdError) as over_http1:
                self.sb.files.read(path, **kw)
            req = files_pb2.ReadFileRequest(sandbox_id=self.sb.id, path=path, **kw)
            with self.assertRaises(boxd.BoxdError) as over_grpc:
                with c.stream(c.files.ReadFileSplit, req) as s:
                    list(s)
            e, g = over_http1.exception, over_grpc.exception
            self.assertEqual((type(e), e.code, e.message, getattr(e, "field", None)),
                             (type(g), g.code, g.message, getattr(g, "field", None)), path)
        with self.assertRaises(boxd.NotFound):
            self.sb.files.read("/no/such/file")
        with self.assertRaises(boxd.PermissionDenied):
            self.sb.files.read("/tmp/secret", user="65534")
        with self.assertRaises(boxd.InvalidArgument) as cm:
            self.sb.files.read("/etc/hostname", offset=-1)
        self.assertEqual(cm.exception.field, "offset")
        gone = boxd.Sandbox(self.sb._info, c)
        gone.id = "nosuchsandbox"
        with self.assertRaises(boxd.NotFound) as cm:
            gone.files.read("/etc/hostname")
        self.assertIn("nosuchsandbox", str(cm.exception))
        # Errors end the call cleanly: the connection is kept.
        self.assertEqual(c.http1.open_calls(), 0)
        self.assertGreaterEqual(c.http1.idle_connections(), 1)

    def _own_client(self) -> "tuple[boxd.Client, boxd.Sandbox]":
        c = boxd.Client()
        self.addCleanup(c.close)
        return c, boxd.Sandbox.connect(self.sb.id, client=c)

    def test_early_break_ends_the_call_in_boxd(self) -> None:
        self.sb.files.write("/workspace/big.bin", os.urandom(48 * MiB))
        c, sb = self._own_client()
        before = boxd_connections()
        for piece in sb.files.read_stream("/workspace/big.bin"):
            self.assertEqual(c.http1.open_calls(), 1)
            self.assertEqual(boxd_connections(), before + 1)  # the call's own connection
            break
        self.assertEqual(c.http1.open_calls(), 0)
        self.assertEqual(c.http1.idle_connections(), 0)  # not kept: its answer was not read to the end
        self.assertTrue(until(lambda: boxd_connections() == before, 15),
                        f"boxd still holds {boxd_connections()} connections, {before} before the read")
        # An explicit close() of a read_stream does the same.
        it = sb.files.read_stream("/workspace/big.bin")
        next(it)
        it.close()
        self.assertEqual(c.http1.open_calls(), 0)
        self.assertTrue(until(lambda: boxd_connections() == before, 15))
        self.assertEqual(len(sb.files.read("/workspace/big.bin", offset=48 * MiB - 10)), 10)

    def test_timeout_fires_and_cancels(self) -> None:
        self.sb.files.write("/workspace/big.bin", os.urandom(48 * MiB))
        c, sb = self._own_client()
        before = boxd_connections()
        t = time.monotonic()
        with self.assertRaises(boxd.DeadlineExceeded):
            for _ in sb.files.read_stream("/workspace/big.bin", request_timeout=0.5):
                time.sleep(0.2)  # a slow consumer: the deadline passes mid-stream
        self.assertLess(time.monotonic() - t, 5)
        self.assertEqual(c.http1.open_calls(), 0)
        self.assertTrue(until(lambda: boxd_connections() == before, 15))
        # The client-wide default timeout applies too.
        c2 = boxd.Client(timeout=0.3)
        self.addCleanup(c2.close)
        with self.assertRaises(boxd.DeadlineExceeded):
            for _ in boxd.Sandbox.connect(self.sb.id, client=c2).files.read_stream("/workspace/big.bin"):
                time.sleep(0.2)

    def test_dead_socket(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            dead = os.path.join(d, "boxd.sock")
            c = boxd.Client(dead)
            sb = boxd.Sandbox(self.sb._info, c)
            t = time.monotonic()
            with self.assertRaises(boxd.Unavailable) as cm:
                sb.files.read("/etc/hostname")
            self.assertIn(dead, str(cm.exception))
            s = socket.socket(socket.AF_UNIX)
            s.bind(dead)  # a socket file nobody listens on
            s.close()
            with self.assertRaises(boxd.Unavailable):
                sb.files.read("/etc/hostname", request_timeout=2)
            self.assertLess(time.monotonic() - t, 5)
            c.close()


class AioReadHTTP1Test(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.c = aio.Client()
        self.sb = await aio.Sandbox.create(image=IMAGE, memory="256m", ttl=600, labels=LABELS, client=self.c)

    async def asyncTearDown(self) -> None:
        await self.sb.delete()
        await self.c.close()

    async def test_exact_bytes_errors_and_ends(self) -> None:
        f = self.sb.files
        for size in (0, 1, 65537, MiB, 3 * MiB + 12345):
            data = os.urandom(size)
            await f.write("/tmp/r.bin", data)
            self.assertEqual(await f.read("/tmp/r.bin"), data, size)
            pieces = [p async for p in f.read_stream("/tmp/r.bin")]
            self.assertTrue(all(type(p) is bytes for p in pieces))  # copies: safe to keep
            self.assertEqual(b"".join(pieces), data, size)
            out = io.BytesIO()
            self.assertEqual(await f.read_into("/tmp/r.bin", out), size)
            self.assertEqual(out.getvalue(), data)
        self.assertEqual(await f.read("/tmp/r.bin", offset=MiB - 1, length=3), data[MiB - 1:MiB + 2])
        self.assertEqual(self.c.http1.idle_connections(), 1)
        got = await f.download(["/tmp/r.bin", "/nope"])
        self.assertEqual(got[0].data, data)
        self.assertIsInstance(got[1].error, boxd.NotFound)
        with self.assertRaises(boxd.NotFound):
            await f.read("/no/such/file")
        with self.assertRaises(boxd.InvalidArgument) as cm:
            await f.read("/tmp/r.bin", length=-3)
        self.assertEqual(cm.exception.field, "length")
        with self.assertRaises(boxd.FailedPrecondition):
            await f.read("/tmp")

        # Left early: the call's connection goes, on boxd's side too.
        await f.write("/workspace/big.bin", os.urandom(48 * MiB))
        await asyncio.sleep(0.2)
        kept = self.c.http1.idle_connections()  # the read takes a kept connection if there is one
        during = boxd_connections() + (0 if kept else 1)
        it = f.read_stream("/workspace/big.bin")
        await it.__anext__()
        self.assertEqual(self.c.http1.open_calls(), 1)
        self.assertEqual(boxd_connections(), during)
        await it.aclose()
        self.assertEqual(self.c.http1.open_calls(), 0)
        self.assertEqual(self.c.http1.idle_connections(), max(kept - 1, 0))  # not kept: left early
        for _ in range(300):
            if boxd_connections() == during - 1:
                break
            await asyncio.sleep(0.05)
        self.assertEqual(boxd_connections(), during - 1)

        # A deadline mid-stream.
        t = time.monotonic()
        with self.assertRaises(boxd.DeadlineExceeded):
            async for _ in f.read_stream("/workspace/big.bin", request_timeout=0.5):
                await asyncio.sleep(0.2)
        self.assertLess(time.monotonic() - t, 5)
        self.assertEqual(self.c.http1.open_calls(), 0)

    async def test_dead_socket_and_stalled_daemon(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            c = aio.Client(os.path.join(d, "dead.sock"))
            with self.assertRaises(boxd.Unavailable) as cm:
                await aio.Sandbox(self.sb._info, c).files.read("/etc/hostname")
            self.assertIn("dead.sock", str(cm.exception))
            await c.close()
        fake = Daemon(lambda conn, _: conn.sendall(OK_HEAD))  # a head, then nothing
        c = aio.Client(fake.path)
        try:
            t = time.monotonic()
            with self.assertRaises(boxd.DeadlineExceeded):
                await aio.Sandbox(self.sb._info, c).files.read("/f", request_timeout=0.5)
            self.assertLess(time.monotonic() - t, 3)
        finally:
            await c.close()
            fake.close()
        fake = Daemon(lambda conn, _: conn.sendall(OK_HEAD + b"5\r\n\x00\xff\xff\xff\xff\r\n"))
        c = aio.Client(fake.path)
        try:
            with self.assertRaises(boxd.Internal):
                await aio.Sandbox(self.sb._info, c).files.read("/f", request_timeout=5)
        finally:
            await c.close()
            fake.close()


class Daemon:
    """A fake boxd on a Unix socket: each connection's request is read to
    its end, then answer(conn, n) writes what it likes (n counts the
    requests on that connection)."""

    def __init__(self, answer: Callable[[socket.socket, int], None]) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "fake.sock")
        self.ln = socket.socket(socket.AF_UNIX)
        self.ln.bind(self.path)
        self.ln.listen(8)
        self.answer = answer
        self.conns: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.ln.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        n = 0
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    b = conn.recv(65536)
                    if not b:
                        return
                    buf += b
                head, buf = buf.split(b"\r\n\r\n", 1)
                ln = int([h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0])
                while len(buf) < ln:
                    buf += conn.recv(65536)
                buf = buf[ln:]
                self.answer(conn, n)
                n += 1
        except OSError:
            pass

    def close(self) -> None:
        self.ln.close()
        for c in self.conns:
            c.close()
        self.dir.cleanup()


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/connect+proto\r\nTransfer-Encoding: chunked\r\n\r\n"


def env(flags: int, msg: bytes) -> bytes:
    return bytes([flags]) + len(msg).to_bytes(4, "big") + msg


def chunked(body: bytes, size: int) -> bytes:
    out = []
    for i in range(0, len(body), size):
        p = body[i:i + size]
        out.append(b"%x\r\n" % len(p) + p + b"\r\n")
    return b"".join(out) + b"0\r\n\r\n"


def data_msg(b: bytes) -> bytes:
    return files_pb2.ReadFileResponse(data=b).SerializeToString()


class HostileAnswerTest(unittest.TestCase):
    def read(self, answer: Callable[[socket.socket, int], None], timeout: float = 5) -> bytes:
        d = Daemon(answer)
        self.addCleanup(d.close)
        c = _client.Client(d.path)
        self.addCleanup(c.close)
        req = files_pb2.ReadFileRequest(sandbox_id="x", path="/f")
        out = io.BytesIO()
        t = time.monotonic()
        try:
            for m in c.read_stream("/boxd.v1.FileService/ReadFile", req, files._READ_SPLIT, timeout):
                if m.data is not None:
                    out.write(m.data)
        finally:
            self.assertLess(time.monotonic() - t, timeout + 3, "the read hung past its deadline")
        return out.getvalue()

    def test_good_answer_in_odd_pieces(self) -> None:
        for size, n in ((1, 3000), (3, 20000), (4096, 200000), (65536, 200000), (1 << 30, 200000)):
            data = os.urandom(n)
            body = env(0, data_msg(data[:n // 3])) + env(0, data_msg(data[n // 3:])) + env(2, b"{}")
            def answer(conn: socket.socket, _: int, size: int = size, body: bytes = body) -> None:
                wire = OK_HEAD + chunked(body, size)
                for i in range(0, len(wire), 7777):  # and the writes cut elsewhere
                    conn.sendall(wire[i:i + 7777])
            self.assertEqual(self.read(answer), data, size)

    def test_content_length_answer(self) -> None:
        body = env(0, data_msg(b"abc")) + env(2, b"{}")
        self.assertEqual(self.read(lambda c, _: c.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/connect+proto\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body)), b"abc")

    def test_error_in_end_message(self) -> None:
        end = env(2, b'{"error":{"code":"invalid_argument","message":"path: bad"}}')
        with self.assertRaises(boxd.InvalidArgument) as cm:
            self.read(lambda c, _: c.sendall(OK_HEAD + chunked(end, 9)))
        self.assertEqual(cm.exception.field, "path")
        for code, cls in (("out_of_range", boxd.InvalidArgument), ("aborted", boxd.FailedPrecondition),
                          ("unauthenticated", boxd.PermissionDenied), ("data_loss", boxd.Internal),
                          ("what", boxd.Unknown)):
            end = env(2, b'{"error":{"code":"%s","message":"m"}}' % code.encode())
            with self.assertRaises(cls):
                self.read(lambda c, _: c.sendall(OK_HEAD + chunked(end, 100)))

    def test_http_error_status(self) -> None:
        with self.assertRaises(boxd.Unimplemented):
            self.read(lambda c, _: c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"))
        j = b'{"code":"resource_exhausted","message":"too many connections"}'
        with self.assertRaises(boxd.ResourceExhausted):
            self.read(lambda c, _: c.sendall(
                b"HTTP/1.1 429 Too Many\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(j) + j))

    def test_malformed_answers(self) -> None:
        bad = {
            "huge envelope": OK_HEAD + b"5\r\n\x00\xff\xff\xff\xff\r\n",
            "17 MiB envelope": OK_HEAD + b"5\r\n\x00\x01\x10\x00\x00\r\n",
            "bad chunk size": OK_HEAD + b"zz\r\nhello\r\n",
            "huge chunk size": OK_HEAD + b"fffffffff\r\n",
            "no CRLF after a chunk": OK_HEAD + b"1\r\n\x00XX4\r\n\x00\x00\x00\x00\r\n",
            "compressed": OK_HEAD + chunked(env(1, b"x"), 100),
            "unknown flags": OK_HEAD + chunked(env(0x80, b"x"), 100),
            "no end message": OK_HEAD + chunked(env(0, data_msg(b"x")), 100),
            "ends inside a message": OK_HEAD + b"6\r\n\x00\x00\x00\x00\x09a\r\n0\r\n\r\n",
            "end message not JSON": OK_HEAD + chunked(env(2, b"nope"), 100),
            "content-type": OK_HEAD.replace(b"connect+proto", b"json"),
            "status line": b"SPDY/3 200 OK\r\n\r\n",
            "header line": b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            "endless header": b"HTTP/1.1 200 OK\r\nX: " + b"a" * (200 << 10),
            "bytes after the end": OK_HEAD + b"5\r\n\x02\x00\x00\x00\x00\r\n1\r\nX\r\n0\r\n\r\n",
            "transfer-encoding": OK_HEAD.replace(b"chunked", b"gzip"),
        }
        for name, wire in bad.items():
            with self.assertRaises(boxd.Internal, msg=name) as cm:
                self.read(lambda c, _, wire=wire: c.sendall(wire))
            self.assertIn("malformed answer from boxd", str(cm.exception), name)

    def test_cut_connection_is_unavailable(self) -> None:
        def cut(c: socket.socket, _: int) -> None:
            c.sendall(OK_HEAD + b"10\r\n" + env(0, data_msg(b"0123456789"))[:16])
            c.shutdown(socket.SHUT_RDWR)
        with self.assertRaises(boxd.Unavailable):
            self.read(cut)
        with self.assertRaises(boxd.Unavailable):
            self.read(lambda c, _: c.shutdown(socket.SHUT_RDWR))

    def test_stalled_answer_meets_the_deadline(self) -> None:
        for wire in (b"", OK_HEAD, OK_HEAD + b"ff\r\n" + env(0, b"x" * 100)):
            with self.assertRaises(boxd.DeadlineExceeded):
                self.read(lambda c, _, wire=wire: c.sendall(wire) if wire else None, timeout=0.5)

    def test_kept_connection_closed_by_the_daemon(self) -> None:
        # The first answer keeps the connection; the daemon then closes it
        # (as boxd's idle timeout or a restart would): the next read goes
        # on a new connection instead of failing.
        body = chunked(env(0, data_msg(b"hi")) + env(2, b"{}"), 100)

        def answer(c: socket.socket, n: int) -> None:
            c.sendall(OK_HEAD + body)
            c.shutdown(socket.SHUT_RDWR)
        d = Daemon(answer)
        self.addCleanup(d.close)
        c = _client.Client(d.path)
        self.addCleanup(c.close)
        req = files_pb2.ReadFileRequest(sandbox_id="x", path="/f")
        for _ in range(3):
            got = b"".join(bytes(m.data) for m in c.read_stream("/boxd.v1.FileService/ReadFile", req,
                                                                  files._READ_SPLIT, 5))
            self.assertEqual(got, b"hi")
        self.assertEqual(len(d.conns), 3)

    def test_deadline_header_sent(self) -> None:
        heads: List[bytes] = []
        d = Daemon(lambda c, _: c.sendall(OK_HEAD + chunked(env(2, b"{}"), 100)))
        self.addCleanup(d.close)
        orig = d._serve

        def spy(conn: socket.socket) -> None:
            heads.append(conn.recv(65536, socket.MSG_PEEK))
            orig(conn)
        d._serve = spy  # type: ignore[assignment]
        c = _client.Client(d.path)
        self.addCleanup(c.close)
        req = files_pb2.ReadFileRequest(sandbox_id="x", path="/f")
        list(c.read_stream("/boxd.v1.FileService/ReadFile", req, files._READ_SPLIT, 2.5))
        self.assertIn(b"\r\nConnect-Timeout-Ms: 2500\r\n", heads[0])
        self.assertIn(b"POST /boxd.v1.FileService/ReadFile HTTP/1.1\r\n", heads[0])


if __name__ == "__main__":
    unittest.main()
