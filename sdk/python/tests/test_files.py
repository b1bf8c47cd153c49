"""sb.files against a real boxd."""

import hashlib
import io
import os
import unittest

from support import SandboxTest, boxd


class FilesTest(SandboxTest):
    def test_write_read(self) -> None:
        info = self.sb.files.write("/workspace/main.py", b"print(1)")
        self.assertEqual(info.size, 8)
        self.assertEqual(info.mode, 0o644)
        self.assertEqual(self.sb.files.read("/workspace/main.py"), b"print(1)")
        self.assertEqual(self.sb.exec(["cat", "main.py"]).stdout, b"print(1)")  # relative to the workdir
        self.sb.files.write_text("t.txt", "héllo\n")
        self.assertEqual(self.sb.files.read_text("t.txt"), "héllo\n")
        self.assertEqual(self.sb.files.read("t.txt", offset=1, length=2), "é".encode())
        self.sb.files.write("t.txt", b"more\n", append=True)
        self.assertEqual(self.sb.files.read("t.txt"), "héllo\nmore\n".encode())
        with self.assertRaises(boxd.AlreadyExists):
            self.sb.files.write("t.txt", b"x", exclusive=True)
        self.sb.files.write("/workspace/bin/run.sh", "#!/bin/sh\necho ran\n", mode=0o755, parents=True)
        self.assertEqual(self.sb.exec(["/workspace/bin/run.sh"]).stdout, b"ran\n")
        empty = self.sb.files.write("empty", b"")
        self.assertEqual(empty.size, 0)
        self.assertEqual(self.sb.files.read("empty"), b"")

    def test_binary_and_streams(self) -> None:
        data = os.urandom((5 << 20) + 123)
        self.sb.files.write("/tmp/big", io.BytesIO(data))
        self.assertEqual(self.sb.files.read("/tmp/big"), data)
        self.sb.files.write("/tmp/big2", (data[i:i + 300000] for i in range(0, len(data), 300000)))
        out = io.BytesIO()
        self.assertEqual(self.sb.files.read_into("/tmp/big2", out), len(data))
        self.assertEqual(out.getvalue(), data)
        self.assertEqual(self.sb.exec(["md5sum", "/tmp/big2"]).stdout_text.split()[0], hashlib.md5(data).hexdigest())
        pieces = list(self.sb.files.read_stream("/tmp/big"))
        self.assertGreater(len(pieces), 1)
        self.assertEqual(b"".join(pieces), data)

    def test_errors(self) -> None:
        with self.assertRaises(boxd.NotFound):
            self.sb.files.read("/no/such/file")
        with self.assertRaises(boxd.NotFound):
            self.sb.files.write("/no/such/dir/f", b"x")
        with self.assertRaises(boxd.InvalidArgument):
            self.sb.files.read("/tmp/a\x00b")
        with self.assertRaises(boxd.FailedPrecondition):
            self.sb.files.read("/tmp")
        self.sb.files.mkdir("/tmp/full/sub", parents=True)
        with self.assertRaises(boxd.FailedPrecondition):
            self.sb.files.rm("/tmp/full")
        self.sb.files.write("/tmp/secret", b"s", mode=0o600)
        with self.assertRaises(boxd.PermissionDenied):
            self.sb.files.read("/tmp/secret", user="65534")

    def test_metadata_ops(self) -> None:
        f = self.sb.files
        f.mkdir("/tmp/d")
        f.mkdir("/tmp/d/a/b", parents=True, mode=0o700)
        self.assertEqual(f.stat("/tmp/d/a/b").mode, 0o700)
        self.assertTrue(f.stat("/tmp/d").is_dir)
        f.write("/tmp/d/x.txt", b"12345")
        st = f.stat("/tmp/d/x.txt")
        self.assertEqual((st.type, st.size, st.path, st.name), ("file", 5, "/tmp/d/x.txt", "x.txt"))
        self.assertEqual([e.path for e in f.list("/tmp/d")], ["a", "x.txt"])
        self.assertEqual([e.path for e in f.list("/tmp/d", depth=-1)], ["a", "a/b", "x.txt"])
        f.chmod("/tmp/d/x.txt", 0o640)
        self.assertEqual(f.stat("/tmp/d/x.txt").mode, 0o640)
        f.mv("/tmp/d/x.txt", "/tmp/d/y.txt")
        self.assertFalse(f.exists("/tmp/d/x.txt"))
        self.assertTrue(f.exists("/tmp/d/y.txt"))
        f.write("/tmp/d/z.txt", b"z")
        with self.assertRaises(boxd.AlreadyExists):
            f.mv("/tmp/d/y.txt", "/tmp/d/z.txt", no_overwrite=True)
        self.sb.exec(["ln", "-s", "y.txt", "/tmp/d/link"])
        self.assertEqual(f.stat("/tmp/d/link").type, "symlink")
        self.assertEqual(f.stat("/tmp/d/link").link_target, "y.txt")
        self.assertEqual(f.stat("/tmp/d/link", follow=True).type, "file")
        f.rm("/tmp/d/z.txt")
        f.rm("/tmp/d", recursive=True)
        self.assertFalse(f.exists("/tmp/d"))

    def test_upload_download_many(self) -> None:
        f = self.sb.files
        big = os.urandom(3 << 20)
        res = f.upload([("/tmp/up/a.txt", b"a"), ("/tmp/up/big.bin", big), ("/tmp/up/run.sh", b"#!/bin/sh\n", 0o755),
                        ("/no/such/dir/x", b"x"), ("/tmp/up/c.txt", "c")], parents=False)
        # No parents: the first file fails as /tmp/up is missing.
        self.assertFalse(res.ok)
        self.assertIsInstance(res[0].error, boxd.NotFound)
        f.mkdir("/tmp/up")
        res = f.upload([("/tmp/up/a.txt", b"a"), ("/tmp/up/big.bin", big), ("/tmp/up/run.sh", b"#!/bin/sh\n", 0o755),
                        ("/no/such/dir/x", b"x"), ("/tmp/up/c.txt", "c")])
        self.assertEqual([r.ok for r in res], [True, True, True, False, True])
        self.assertIsInstance(res[3].error, boxd.NotFound)
        self.assertEqual([r.path for r in res.failed], ["/no/such/dir/x"])
        self.assertEqual(res[1].size, len(big))
        self.assertEqual(res.files_written, 4)
        self.assertEqual(f.stat("/tmp/up/run.sh").mode, 0o755)
        res = f.upload({"/tmp/up2/q/one": b"1", "/tmp/up2/two": b"2"}, parents=True)
        self.assertTrue(res.ok)

        got = f.download(["/tmp/up/a.txt", "/tmp/up/missing", "/tmp/up/big.bin", "/tmp/up"])
        self.assertEqual([g.ok for g in got], [True, False, True, False])
        self.assertEqual(got[0].data, b"a")
        self.assertEqual(got[2].data, big)
        self.assertEqual(got[2].info.size, len(big))
        self.assertIsInstance(got[1].error, boxd.NotFound)
        self.assertIsInstance(got[3].error, boxd.FailedPrecondition)

    def test_watch(self) -> None:
        f = self.sb.files
        f.mkdir("/tmp/w/sub", parents=True)
        with f.watch("/tmp/w", recursive=True) as w:
            f.write("/tmp/w/sub/new.txt", b"x")
            f.rm("/tmp/w/sub/new.txt")
            events = []
            for e in w:
                events.append((e.op, e.path))
                if e.op == "remove":
                    break
        self.assertIn(("remove", "/tmp/w/sub/new.txt"), events)
        self.assertTrue(any(p.startswith("/tmp/w/sub/") and op in ("create", "rename") for op, p in events), events)
        with self.assertRaises(boxd.NotFound):
            f.watch("/tmp/no-such-dir")

    def test_one_gib_streams_in_bounded_memory(self) -> None:
        import resource

        block = os.urandom(1 << 20)
        want = hashlib.md5()

        def gen():
            for i in range(1024):
                b = i.to_bytes(4, "little") + block[4:]
                want.update(b)
                yield b

        info = self.sb.files.write("/workspace/gib", gen())
        self.assertEqual(info.size, 1 << 30)
        self.assertEqual(self.sb.exec(["md5sum", "/workspace/gib"]).stdout_text.split()[0], want.hexdigest())
        got, n = hashlib.md5(), 0
        for piece in self.sb.files.read_stream("/workspace/gib"):
            got.update(piece)
            n += len(piece)
        self.assertEqual((n, got.hexdigest()), (1 << 30, want.hexdigest()))
        self.sb.files.rm("/workspace/gib")
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
        self.assertLess(peak_mib, 400, "1 GiB through the SDK must not be held in memory")

    def test_too_many_files(self) -> None:
        with self.assertRaises(boxd.ResourceExhausted):
            self.sb.files.upload([(f"/tmp/many/{i}", b"") for i in range(10001)], parents=True)


if __name__ == "__main__":
    unittest.main()
