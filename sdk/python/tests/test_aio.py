"""boxd.aio against a real boxd."""

import asyncio
import os
import tempfile
import time
import unittest

from support import IMAGE, LABELS, boxd
import boxd.aio as aio


class AioTest(unittest.IsolatedAsyncioTestCase):
    async def test_lifecycle_exec_files(self) -> None:
        async with aio.Sandbox.create(image=IMAGE, memory="128m", ttl=600, labels=LABELS) as sb:
            self.assertIn(sb.id, [s.id for s in await aio.list(labels=LABELS)])
            self.assertEqual((await aio.Sandbox.connect(sb.id)).id, sb.id)
            self.assertEqual((await sb.info()).state, "running")
            r = await sb.exec(["sh", "-c", r"echo hi; printf '\377' >&2; exit 2"], timeout=5)
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (2, b"hi\n", b"\xff"))
            r = await sb.exec(["sleep", "30"], timeout=0.5)
            self.assertTrue(r.timed_out)
            self.assertEqual(r.exit_code, 124)
            self.assertEqual((await sb.exec(["cat"], stdin=b"in")).stdout, b"in")

            async def gen():
                yield b"a"
                yield b"b"

            got = []
            r = await sb.exec(["cat"], stdin=gen(), on_stdout=got.append)
            self.assertEqual(b"".join(got), b"ab")
            t0 = time.monotonic()
            first = None
            async with sb.exec_stream(["sh", "-c", "echo 1; sleep 1; echo 2"]) as ex:
                outs = []
                async for o in ex:
                    outs.append(o.data)
                    first = first or time.monotonic() - t0
            self.assertEqual(outs, [b"1\n", b"2\n"])
            self.assertLess(first, 0.9)
            self.assertEqual(ex.result.exit_code, 0)
            async with sb.exec_stream(["sh", "-c", "read x; echo got $x"], stdin=boxd.PIPE) as ex:
                await ex.write(b"v\n")
                r = await ex.wait()
            self.assertEqual(r.stdout, b"got v\n")
            with self.assertRaises(boxd.DeadlineExceeded):
                await sb.exec(["sleep", "38"], request_timeout=1)
            await asyncio.sleep(0.3)
            self.assertNotIn("sleep 38", (await sb.exec(["ps", "-o", "args"])).stdout_text)

            data = os.urandom((2 << 20) + 5)
            await sb.files.write("/tmp/a/b.bin", data, parents=True, mode=0o600)
            self.assertEqual(await sb.files.read("/tmp/a/b.bin"), data)
            self.assertEqual((await sb.files.stat("/tmp/a/b.bin")).mode, 0o600)
            await sb.files.write_text("/tmp/a/t", "é")
            self.assertEqual(await sb.files.read_text("/tmp/a/t"), "é")
            self.assertEqual([e.path for e in await sb.files.list("/tmp/a")], ["b.bin", "t"])
            await sb.files.mkdir("/tmp/a/d")
            await sb.files.mv("/tmp/a/t", "/tmp/a/d/t")
            await sb.files.chmod("/tmp/a/d/t", 0o700)
            self.assertTrue(await sb.files.exists("/tmp/a/d/t"))
            res = await sb.files.upload([("/tmp/a/u1", b"1"), ("/nope/u2", b"2")])
            self.assertEqual([r.ok for r in res], [True, False])
            dl = await sb.files.download(["/tmp/a/u1", "/tmp/a/missing", "/tmp/a/b.bin"])
            self.assertEqual([d.data for d in dl], [b"1", b"", data])
            self.assertIsInstance(dl[1].error, boxd.NotFound)
            await sb.files.rm("/tmp/a", recursive=True)
            self.assertFalse(await sb.files.exists("/tmp/a"))
            with self.assertRaises(boxd.NotFound):
                await sb.files.read("/tmp/a/b.bin")

            p = await sb.processes.start(["sh", "-c", "echo bg; sleep 0.3; exit 6"])
            self.assertIn(p.id, [x.id for x in await sb.processes.list()])
            self.assertEqual((await sb.processes.wait(p.id)).result.exit_code, 6)
            async with sb.processes.attach(p.id) as a:
                r = await a.wait()
            self.assertEqual((r.stdout, r.exit_code), (b"bg\n", 6))
            p = await sb.processes.start(["sleep", "39"])
            await sb.processes.kill(p.id)
            self.assertEqual((await sb.processes.wait(p.id)).result.signal, "SIGKILL")

            s = await sb.sessions.create("a")
            await s.exec("cd /tmp; X=5")
            self.assertEqual((await s.exec("pwd; echo $X")).stdout, b"/tmp\n5\n")
            self.assertEqual([x.name for x in await sb.sessions.list()], ["a"])
            await sb.sessions.delete("a")
        with self.assertRaises(boxd.NotFound):
            await aio.Sandbox.connect(sb.id)

    async def test_errors(self) -> None:
        with self.assertRaises(boxd.NotFound):
            await aio.Sandbox.connect("nosuchsandbox")
        with self.assertRaises(boxd.InvalidArgument) as cm:
            await aio.Sandbox.create(image=IMAGE, memory="lots", labels=LABELS)
        self.assertEqual(cm.exception.field, "limits.memory")
        with tempfile.TemporaryDirectory() as d:
            async with aio.Client(os.path.join(d, "dead.sock")) as c:
                with self.assertRaises(boxd.Unavailable):
                    await aio.list(client=c)

    async def test_concurrent(self) -> None:
        async with aio.Sandbox.create(image=IMAGE, labels=LABELS) as sb:
            rs = await asyncio.gather(*(sb.exec(["sh", "-c", f"sleep 0.5; echo {i}"]) for i in range(6)))
            self.assertEqual([r.stdout for r in rs], [f"{i}\n".encode() for i in range(6)])


if __name__ == "__main__":
    unittest.main()
