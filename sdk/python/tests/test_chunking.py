"""Data larger than one message: boxd takes no message over 8 MiB
(rpc.MaxMessageBytes), so the SDK sends stdin and file data in pieces."""

import asyncio
import hashlib
import os
import unittest

from support import IMAGE, LABELS, SandboxTest, boxd

import boxd.aio


class ChunkingTest(SandboxTest):
    def test_exec_stdin_50mib(self) -> None:
        data = os.urandom(50 << 20)
        want = hashlib.sha256(data).hexdigest()
        r = self.sb.exec(["sha256sum"], stdin=data, timeout=120)
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertEqual(r.stdout_text.split()[0], want)
        # bytearray and memoryview, through exec_stream, and text
        with self.sb.exec_stream(["wc", "-c"], stdin=bytearray(data)) as ex:
            out = b"".join(o.data for o in ex)
        self.assertEqual(out.strip(), str(len(data)).encode())
        self.assertEqual(self.sb.exec(["wc", "-c"], stdin=memoryview(data)[1:]).stdout.strip(),
                         str(len(data) - 1).encode())
        text = "é" * (5 << 20)
        self.assertEqual(self.sb.exec(["wc", "-c"], stdin=text).stdout.strip(), str(len(text.encode())).encode())

    def test_exec_stream_over_inline(self) -> None:
        # Over boxd's inline stdin (64 KiB): whole and in order, every time
        # (in the start message, it raced the stream's end).
        data = os.urandom(7 << 20)
        for size in (100 << 10, 1 << 20, (1 << 20) + 1, 7 << 20) * 3:
            with self.sb.exec_stream(["sha256sum"], stdin=data[:size]) as ex:
                out = b"".join(o.data for o in ex)
            self.assertEqual(out.split()[0].decode(), hashlib.sha256(data[:size]).hexdigest(), size)

    def test_file_9mib(self) -> None:
        data = os.urandom(9 << 20)
        info = self.sb.files.write("/tmp/nine", data)
        self.assertEqual(info.size, len(data))
        self.assertEqual(self.sb.exec(["sha256sum", "/tmp/nine"]).stdout_text.split()[0],
                         hashlib.sha256(data).hexdigest())
        self.assertEqual(self.sb.files.read("/tmp/nine"), data)

    def test_aio(self) -> None:
        async def run() -> None:
            async with boxd.aio.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS) as sb:
                data = os.urandom(50 << 20)
                r = await sb.exec(["sha256sum"], stdin=data, timeout=120)
                self.assertEqual(r.stdout_text.split()[0], hashlib.sha256(data).hexdigest())
                nine = data[:9 << 20]
                await sb.files.write("/tmp/nine", nine)
                self.assertEqual(await sb.files.read("/tmp/nine"), nine)

        asyncio.run(run())


if __name__ == "__main__":
    unittest.main()
