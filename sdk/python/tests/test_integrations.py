"""boxd.integrations.BoxdSandbox (an agent framework's sandbox backend) against a real boxd."""

import time
import unittest

from support import IMAGE, LABELS, boxd
from boxd.integrations import TIMEOUT_EXIT_CODE, BoxdSandbox


class IntegrationsTest(unittest.TestCase):
    sb: BoxdSandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sb = BoxdSandbox(image=IMAGE, memory="256m", ttl="10m", labels=LABELS, default_timeout=30)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.close()

    def test_execute(self) -> None:
        r = self.sb.execute("echo out; echo err >&2; exit 3")
        self.assertEqual((r.output, r.exit_code, r.truncated), ("out\nerr\n", 3, False))
        self.assertEqual(self.sb.execute("pwd").output, "/workspace\n")
        t0 = time.monotonic()
        r = self.sb.execute("sleep 30", timeout=1)
        self.assertEqual(r.exit_code, TIMEOUT_EXIT_CODE)
        self.assertIn("[TIMEOUT] Command timed out after 1s", r.output)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertNotIn("sleep 30", self.sb.execute("ps -o args").output)

    def test_upload_download(self) -> None:
        up = self.sb.upload_files([("/workspace/in/a.txt", b"A"), ("rel/b.bin", b"\x00\xff"),
                                   ("/proc/nope/x", b"x")])
        self.assertEqual([(u.path, u.error) for u in up[:2]], [("/workspace/in/a.txt", None), ("rel/b.bin", None)])
        self.assertIsNotNone(up[2].error)
        down = self.sb.download_files(["/workspace/in/a.txt", "/workspace/rel/b.bin", "/workspace/missing", "/workspace"])
        self.assertEqual([(d.path, d.content, d.error) for d in down],
                         [("/workspace/in/a.txt", b"A", None), ("/workspace/rel/b.bin", b"\x00\xff", None),
                          ("/workspace/missing", None, "file_not_found"), ("/workspace", None, "is_directory")])

    def test_file_tools(self) -> None:
        sb = self.sb
        w = sb.write("/workspace/t/app.py", "def f():\n    return 1\n\ndef g():\n    return 1\n")
        self.assertIsNone(w.error)
        self.assertEqual(w.path, "/workspace/t/app.py")
        self.assertIn("already exists", sb.write("/workspace/t/app.py", "x").error)
        self.assertEqual(sb.read("/workspace/t/app.py", offset=1, limit=2), "     2\t    return 1\n     3\t")
        self.assertEqual(sb.read("/workspace/t/nope.py"), "Error: File '/workspace/t/nope.py' not found")
        e = sb.edit("/workspace/t/app.py", "return 1", "return 2")
        self.assertIn("appears 2 times", e.error)
        self.assertIn("not found", sb.edit("/workspace/t/app.py", "absent", "x").error)
        e = sb.edit("/workspace/t/app.py", "return 1", "return 2", replace_all=True)
        self.assertEqual((e.error, e.occurrences), (None, 2))
        self.assertEqual(sb.execute("grep -c 'return 2' t/app.py").output, "2\n")
        sb.write("/workspace/t/sub/notes.md", "return of the TODO\n")
        ls = sb.ls_info("/workspace/t")
        self.assertEqual([(x["path"], x["is_dir"]) for x in ls], [("/workspace/t/app.py", False), ("/workspace/t/sub/", True)])
        self.assertEqual([x["path"] for x in sb.glob_info("**/*.md", path="/workspace")], ["/workspace/t/sub/notes.md"])
        self.assertEqual(sb.grep_raw("return 2", path="/workspace/t"),
                         [{"path": "/workspace/t/app.py", "line": 2, "text": "    return 2"},
                          {"path": "/workspace/t/app.py", "line": 5, "text": "    return 2"}])
        self.assertEqual([m["path"] for m in sb.grep_raw("return", path="/workspace/t", glob="*.md")], ["/workspace/t/sub/notes.md"])
        # Plain text, not a regular expression ("g(" would not compile as one).
        self.assertEqual(sb.grep_raw("g(", path="/workspace/t"), [{"path": "/workspace/t/app.py", "line": 4, "text": "def g():"}])

    def test_reattach(self) -> None:
        other = BoxdSandbox(self.sb.id)
        self.assertEqual(other.execute("echo same").output, "same\n")
        other.close()  # not its sandbox: kept
        self.assertEqual(boxd.Sandbox.connect(self.sb.id).id, self.sb.id)


if __name__ == "__main__":
    unittest.main()
