"""Managing a running sandbox: update, stop/start, pause/unpause, stats and
the event log, sync and asyncio, against the real boxd."""

import threading
import unittest

from support import IMAGE, LABELS

import boxd
import boxd.aio


class ManageTest(unittest.TestCase):
    def test_update(self) -> None:
        with boxd.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS) as sb:
            before = sb.info().expires_at
            info = sb.update(memory="300m", pids=77, env={"UPDATED": "yes"}, workdir="/tmp", extend="1h")
            self.assertEqual(info.memory_bytes, 300 << 20)
            self.assertEqual(info.pids, 77)
            self.assertGreater(info.expires_at, before)
            # Later commands get the env and workdir (boxd's own e2e test reads the cgroup).
            self.assertEqual(sb.exec(["sh", "-c", "echo $UPDATED; pwd"]).stdout_text, "yes\n/tmp\n")
            with self.assertRaises(boxd.InvalidArgument) as cm:
                sb.update(memory="12xb")
            self.assertIn("memory", cm.exception.field or "")
            with self.assertRaises(boxd.InvalidArgument):
                sb.update(ttl="1h", extend="1h")
            self.assertEqual(sb.info().memory_bytes, 300 << 20)  # nothing changed by the refused calls

    def test_stop_start(self) -> None:
        with boxd.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS) as sb:
            sb.files.write("/workspace/kept.txt", b"kept")
            self.assertEqual(sb.stop(timeout=1).state, "stopped")
            with self.assertRaises(boxd.FailedPrecondition):
                sb.exec(["true"])
            with self.assertRaises(boxd.FailedPrecondition):
                sb.stop()
            self.assertEqual(sb.start().state, "running")
            self.assertEqual(sb.files.read("/workspace/kept.txt"), b"kept")
            self.assertEqual(sb.exec(["echo", "back"]).stdout_text, "back\n")
            with self.assertRaises(boxd.FailedPrecondition):
                sb.start()

    def test_pause_stats_events(self) -> None:
        with boxd.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS) as sb:
            st = sb.stats()
            self.assertEqual((st.id, st.state, st.memory_limit_bytes), (sb.id, "running", 256 << 20))
            self.assertIsNotNone(st.usage)
            self.assertGreater(st.usage.pids, 0)
            samples = []
            for s in sb.stats_stream(interval=0.2):
                samples.append(s)
                if len(samples) == 2:
                    break
            self.assertEqual([s.id for s in samples], [sb.id, sb.id])

            # A follower sees the pause as it happens.
            seen: list = []

            def follow() -> None:
                for ev in boxd.events(filters=[f"sandbox={sb.id}", "type=paused"], follow=True):
                    seen.append(ev)
                    return

            t = threading.Thread(target=follow, daemon=True)
            t.start()
            # The follower's stream is open once a pause is seen; pause until it is.
            sb.pause()
            self.assertEqual(sb.stats().state, "paused")
            with self.assertRaises(boxd.FailedPrecondition):
                sb.exec(["true"])
            sb.unpause()
            self.assertEqual(sb.exec(["echo", "thawed"]).stdout_text, "thawed\n")
            for _ in range(20):
                t.join(0.5)
                if not t.is_alive():
                    break
                sb.pause()
                sb.resume()
            self.assertFalse(t.is_alive(), "the following events stream never saw a pause")
            self.assertEqual((seen[0].type, seen[0].sandbox), ("paused", sb.id))

            # The replay has the whole story, in order.
            types = [e.type for e in boxd.events(since="10m", filters=[f"sandbox={sb.id}"])]
            for want in ("created", "paused", "resumed"):
                self.assertIn(want, types)
            self.assertLess(types.index("created"), types.index("paused"))
            seqs = [e.seq for e in boxd.events(since="10m", filters=[f"sandbox={sb.id}"])]
            self.assertEqual(seqs, sorted(seqs))
            with self.assertRaises(boxd.InvalidArgument):
                list(boxd.events(filters=["colour=blue"]))
        with self.assertRaises(boxd.NotFound):
            sb.stats()
        with self.assertRaises(boxd.NotFound):
            sb.pause()


class AioManageTest(unittest.IsolatedAsyncioTestCase):
    async def test_manage(self) -> None:
        sb = await boxd.aio.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS)
        async with sb:
            info = await sb.update(memory="200m", env=["AIO=1"])
            self.assertEqual(info.memory_bytes, 200 << 20)
            self.assertEqual((await sb.exec(["sh", "-c", "echo $AIO"])).stdout_text, "1\n")
            await sb.pause()
            self.assertEqual((await sb.stats()).state, "paused")
            with self.assertRaises(boxd.FailedPrecondition):
                await sb.exec(["true"])
            await sb.resume()
            n = 0
            async for s in sb.stats_stream(interval=0.2):
                self.assertEqual(s.memory_limit_bytes, 200 << 20)
                n += 1
                if n == 2:
                    break
            self.assertEqual((await sb.stop(timeout=1)).state, "stopped")
            self.assertEqual((await sb.start()).state, "running")
            self.assertEqual((await sb.exec(["echo", "ok"])).stdout_text, "ok\n")
            types = [e.type async for e in boxd.aio.events(since="10m", filters=[f"sandbox={sb.id}"])]
            for want in ("created", "paused", "resumed", "started"):
                self.assertIn(want, types)
            with self.assertRaises(boxd.InvalidArgument):
                await sb.update(cpus=-1)


if __name__ == "__main__":
    unittest.main()
