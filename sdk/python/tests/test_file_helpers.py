"""sb.files.read_lines/edit/glob/grep/chown (sync and asyncio) against a real boxd."""

import unittest

from support import IMAGE, LABELS, SandboxTest, boxd
import boxd.aio as aio


class FileHelpersTest(SandboxTest):
    def test_read_lines(self) -> None:
        f = self.sb.files
        f.write("/tmp/h/u.txt", "héllo ✓\n" + "x" * 5000 + "\nthird\n", parents=True)
        r = f.read_lines("/tmp/h/u.txt")
        self.assertEqual([(l.number, l.text, l.cut) for l in r], [(1, "héllo ✓", False), (2, "x" * 4096, True), (3, "third", False)])
        self.assertFalse(r.more)
        self.assertFalse(r.binary)
        self.assertEqual(r.info.size, len("héllo ✓\n".encode()) + 5001 + 6)
        r = f.read_lines("/tmp/h/u.txt", offset=2, limit=1)
        self.assertEqual(r.numbered(), "     3\tthird\n")
        r = f.read_lines("/tmp/h/u.txt", limit=1)
        self.assertTrue(r.more)
        self.assertEqual(r.next_offset, 1)
        f.write("/tmp/h/bin", b"\x00\x01\xff\n")
        self.assertTrue(f.read_lines("/tmp/h/bin").binary)
        with self.assertRaises(boxd.NotFound):
            f.read_lines("/tmp/h/none")
        with self.assertRaises(boxd.InvalidArgument) as cm:
            f.read_lines("/tmp/h/u.txt", limit=-1)
        self.assertEqual(cm.exception.field, "limit")

    def test_edit(self) -> None:
        f = self.sb.files
        f.write("/tmp/e.py", "a = 1\nb = 1\n", mode=0o640)
        with self.assertRaises(boxd.FailedPrecondition) as cm:
            f.edit("/tmp/e.py", "= 1", "= 2")
        self.assertIn("occurs 2 times", cm.exception.message)
        self.assertEqual(f.read("/tmp/e.py"), b"a = 1\nb = 1\n")
        with self.assertRaises(boxd.FailedPrecondition):
            f.edit("/tmp/e.py", "nope", "x")
        r = f.edit("/tmp/e.py", "b = 1", "b = «2»")
        self.assertEqual((r.replacements, r.line, r.info.mode), (1, 2, 0o640))
        r = f.edit("/tmp/e.py", " = ", "=", replace_all=True)
        self.assertEqual(r.replacements, 2)
        self.assertEqual(f.read_text("/tmp/e.py"), "a=1\nb=«2»\n")
        with self.assertRaises(boxd.InvalidArgument):
            f.edit("/tmp/e.py", "", "x")

    def test_glob_grep_chown(self) -> None:
        f = self.sb.files
        f.upload({"/tmp/g/a.py": "import os\n# TODO one\n", "/tmp/g/sub/b.py": "TODO two\n",
                  "/tmp/g/sub/c.txt": "TODO three\n", "/tmp/g/.hidden/d.py": "x\n"}, parents=True)
        self.sb.exec(["ln", "-s", "/etc", "/tmp/g/sub/etc"])
        found = f.glob("**/*.py", path="/tmp/g")
        self.assertEqual([x.path for x in found], ["/tmp/g/a.py", "/tmp/g/.hidden/d.py", "/tmp/g/sub/b.py"])
        self.assertFalse(found.truncated)
        found = f.glob("/tmp/g/**", limit=2)
        self.assertEqual(len(found), 2)
        self.assertTrue(found.truncated)
        self.assertIn("limit", found.truncated_reason)
        m = f.grep("TODO", "/tmp/g")
        self.assertEqual([(x.path, x.line, x.text) for x in m],
                         [("/tmp/g/a.py", 2, "# TODO one"), ("/tmp/g/sub/b.py", 1, "TODO two"), ("/tmp/g/sub/c.txt", 1, "TODO three")])
        m = f.grep("todo t", "/tmp/g", glob="*.txt", ignore_case=True)
        self.assertEqual([x.path for x in m], ["/tmp/g/sub/c.txt"])
        self.assertEqual(len(f.grep("root:", "/tmp/g")), 0)  # the link to /etc is not followed
        with self.assertRaises(boxd.InvalidArgument):
            f.grep("(", "/tmp/g")
        f.chown("/tmp/g", "sandbox:", recursive=True)
        self.assertEqual((f.stat("/tmp/g/sub/b.py").uid, f.stat("/tmp/g/sub/b.py").gid), (1000, 1000))
        self.assertEqual(f.stat("/etc/passwd").uid, 0)
        with self.assertRaises(boxd.PermissionDenied):
            f.chown("/tmp/g/a.py", "root", user="sandbox")


class AioFileHelpersTest(unittest.IsolatedAsyncioTestCase):
    async def test_helpers(self) -> None:
        async with aio.Sandbox.create(image=IMAGE, memory="128m", ttl=600, labels=LABELS) as sb:
            await sb.files.write("/tmp/x/a.txt", "one\ntwo\n", parents=True)
            r = await sb.files.read_lines("/tmp/x/a.txt", offset=1)
            self.assertEqual(r.numbered(), "     2\ttwo\n")
            e = await sb.files.edit("/tmp/x/a.txt", "two", "2")
            self.assertEqual((e.replacements, e.line), (1, 2))
            g = await sb.files.glob("*.txt", path="/tmp/x")
            self.assertEqual([x.path for x in g], ["/tmp/x/a.txt"])
            m = await sb.files.grep("^2$", "/tmp/x")
            self.assertEqual([(x.path, x.line) for x in m], [("/tmp/x/a.txt", 2)])
            await sb.files.chown("/tmp/x/a.txt", "1000:1000")
            self.assertEqual((await sb.files.stat("/tmp/x/a.txt")).uid, 1000)
            with self.assertRaises(boxd.FailedPrecondition):
                await sb.files.edit("/tmp/x/a.txt", "missing", "x")


if __name__ == "__main__":
    unittest.main()
