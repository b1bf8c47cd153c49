"""Driven by e2e TestSDKPythonDaemonRestart (not a unittest module): holds a
streaming exec open, prints "ready ID", and expects boxd to be killed and
restarted under it (it reads one line from stdin when the new boxd is up).
The stream must fail with boxd.Unavailable, not hang, and so must a file
read (HTTP/1.1, boxd/_http1.py) left half-read; then the same client must
reach the restarted boxd (its kept HTTP/1.1 connection is dead: the next
read goes on a new one), and the sandbox and its background process must
have survived."""

import os
import sys
import time

import support  # noqa: F401  (puts the SDK on sys.path)
import boxd

sb = boxd.Sandbox.create(image=support.IMAGE, labels=support.LABELS)
ok = False
try:
    ex = sb.exec_stream(["sh", "-c", "echo up; sleep 60"])
    it = iter(ex)
    assert next(it).data == b"up\n"
    bg = sb.processes.start(["sh", "-c", "sleep 2; echo bg-done"])
    data = os.urandom(32 << 20)
    sb.files.write("/workspace/big.bin", data)
    assert sb.files.read("/workspace/big.bin", length=10) == data[:10]  # leaves a kept connection
    reading = iter(sb.files.read_stream("/workspace/big.bin"))
    got = len(next(reading))
    print("ready", sb.id, flush=True)
    t = time.monotonic()
    try:
        for _ in it:
            pass
        raise AssertionError(f"the stream ended without an error, result {ex.result}")
    except boxd.Unavailable as e:
        print(f"stream failed after {time.monotonic() - t:.2f}s: {e!r}", flush=True)
    try:
        for piece in reading:
            got += len(piece)
        raise AssertionError(f"the read ended without an error after {got} bytes")
    except boxd.Unavailable as e:
        assert got < len(data), got
        print(f"read failed after {got} bytes: {e!r}", flush=True)
    sys.stdin.readline()  # boxd is back
    assert sb.files.read("/workspace/big.bin") == data
    again = boxd.Sandbox.connect(sb.id)
    assert again.exec(["echo", "again"]).stdout == b"again\n"
    done = sb.processes.wait(bg.id, request_timeout=30)
    assert done.result.exit_code == 0, done
    with sb.processes.attach(bg.id) as a:
        assert a.wait().stdout == b"bg-done\n"
    ok = True
finally:
    try:
        sb.delete()
    except boxd.BoxdError as e:
        print("delete:", e)
print("OK" if ok else "FAILED", flush=True)
