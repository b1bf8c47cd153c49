"""Driven by e2e TestSDKPythonRemote (not a unittest module): calls a TCP
listener of boxd's over TLS with a token, all settings from BOXD_HOST,
BOXD_TOKEN and BOXD_TLS_CA (BOXD_SOCKET names no socket: a call that went
to a socket would fail). Creates a sandbox, runs commands (unary, server-
and bidi-streaming calls), writes and reads a file (the read goes over
gRPC, not the socket's HTTP/1.1 path), with the sync and asyncio clients;
prints "sandbox ID" for each, then checks that a wrong token gets
boxd.Unauthenticated and that no repr or error shows a token."""

import asyncio
import os

import boxd
import boxd.aio

TOKEN = os.environ["BOXD_TOKEN"]


def sync_client() -> None:
    c = boxd.Client()
    assert c.socket is None and c.http1 is None, c
    assert TOKEN not in repr(c), repr(c)
    sb = boxd.Sandbox.create(client=c)
    print("sandbox", sb.id, flush=True)
    r = sb.exec(["sh", "-c", "echo over tls; exit 3"])
    assert (r.exit_code, r.stdout) == (3, b"over tls\n"), r
    r = sb.exec(["cat"], stdin=b"piped in")  # bidi stream
    assert (r.exit_code, r.stdout) == (0, b"piped in"), r
    out = b"".join(o.data for o in sb.exec_stream(["sh", "-c", "echo a; echo b"]))
    assert out == b"a\nb\n", out
    data = os.urandom(3 << 20)  # several messages each way
    sb.files.write("/tmp/f.bin", data)
    assert sb.files.read("/tmp/f.bin") == data
    c.close()


async def aio_client() -> None:
    async with boxd.aio.Client() as c:
        assert c.http1 is None
        sb = await boxd.aio.Sandbox.create(client=c)
        print("sandbox", sb.id, flush=True)
        r = await sb.exec(["sh", "-c", "echo aio"])
        assert (r.exit_code, r.stdout) == (0, b"aio\n"), r
        await sb.files.write("/tmp/a.txt", b"aio payload")
        assert await sb.files.read("/tmp/a.txt") == b"aio payload"


def wrong_token() -> None:
    bad = TOKEN[:-4] + ("AAAA" if not TOKEN.endswith("AAAA") else "BBBB")
    c = boxd.Client(token=bad)
    try:
        boxd.Sandbox.create(client=c)
        raise AssertionError("create with a wrong token worked")
    except boxd.Unauthenticated as e:
        assert bad not in str(e) and TOKEN not in str(e), e
        print("wrong token:", repr(e), flush=True)
    try:
        boxd.Client(token="")  # BOXD_TOKEN is the default: an empty one is none
    except boxd.InvalidArgument:
        raise AssertionError("an empty token argument did not fall back to BOXD_TOKEN")
    os.environ.pop("BOXD_TOKEN")
    try:
        boxd.Client()
        raise AssertionError("a host without a token made a client")
    except boxd.InvalidArgument as e:
        assert "token" in str(e), e
        print("no token:", e, flush=True)


sync_client()
asyncio.run(aio_client())
wrong_token()
print("OK", flush=True)
