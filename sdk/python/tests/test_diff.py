"""Sandbox.diff (sync and asyncio) against a real boxd."""

import unittest

from support import IMAGE, LABELS, boxd
import boxd.aio as aio


class DiffTest(unittest.TestCase):
    def test_diff(self) -> None:
        with boxd.Sandbox.create(image=IMAGE, ttl="10m", labels=LABELS) as sb:
            sb.exec(["sh", "-c", "echo hi > /workspace/new; rm /etc/shadow; chmod 600 /etc/hostname;"
                     " touch \"$(printf '/workspace/b\\377d')\""])
            ch = sb.diff(patch=True)
            self.assertFalse(ch.truncated)
            self.assertEqual([(c.change, c.path, c.type) for c in ch.entries], [
                ("modified", "/etc/hostname", "file"), ("deleted", "/etc/shadow", "file"),
                ("added", "/workspace/b\ufffdd", "file"), ("added", "/workspace/new", "file")])
            self.assertEqual(ch.entries[0].mode, 0o600)
            self.assertEqual(ch.entries[2].raw_path, b"/workspace/b\xffd")
            self.assertEqual(ch.entries[3].patch, "--- /dev/null\n+++ b/workspace/new\n@@ -0,0 +1,1 @@\n+hi\n")
            with self.assertRaises(boxd.FailedPrecondition):
                sb.diff("fork")


class AioDiffTest(unittest.IsolatedAsyncioTestCase):
    async def test_diff(self) -> None:
        async with aio.Sandbox.create(image=IMAGE, ttl=600, labels=LABELS) as sb:
            await sb.exec(["sh", "-c", "echo hi > /workspace/new"])
            ch = await sb.diff()
            self.assertEqual([(c.change, c.path, c.patch) for c in ch.entries], [("added", "/workspace/new", "")])
            with self.assertRaises(boxd.InvalidArgument):
                await sb.diff("Bad Name!")


if __name__ == "__main__":
    unittest.main()
