"""Images (import, list, remove, build), commit, fork, published ports,
network updates, tar copies, the one-way ExecStream and warm-pool sizes,
sync and asyncio, against the real boxd. Pull and push run against a real
registry in registry_client.py (e2e TestSDKRegistry)."""

import asyncio
import dataclasses
import io
import tarfile
import time
import unittest
import urllib.request
import uuid

from support import IMAGE, LABELS

import boxd
import boxd.aio


def tar_of(files: dict) -> bytes:
    """A tar holding files ({name: bytes}), regular files 0644."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def untar(data: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}


def unique(prefix: str) -> str:
    return f"sdk-py/{prefix}-{uuid.uuid4().hex[:8]}:v1"


class ImagesTest(unittest.TestCase):
    def test_import_list_remove(self) -> None:
        ref = unique("rootfs")
        rootfs = tar_of({"hello.txt": b"hi from a rootfs\n"})
        imgs = boxd.images.import_image(io.BytesIO(rootfs), name=ref, rootfs=True)
        self.assertEqual([i.name for i in imgs], [ref])
        self.assertTrue(imgs[0].digest.startswith("sha256:"))
        listed = {i.name: i for i in boxd.images.list()}
        self.assertEqual(listed[ref].digest, imgs[0].digest)
        self.assertTrue(listed[ref].labels.get("boxd.io/imported-by", "").startswith("uid="))
        with self.assertRaises(boxd.AlreadyExists):
            boxd.images.import_image(rootfs, name=ref, rootfs=True)
        again = boxd.images.import_image(tar_of({"other.txt": b"2"}), name=ref, rootfs=True, force=True)
        self.assertNotEqual(again[0].digest, imgs[0].digest)
        with self.assertRaises(boxd.InvalidArgument):
            boxd.images.import_image(rootfs, rootfs=True)  # a rootfs import needs a name
        boxd.images.remove(ref)
        self.assertNotIn(ref, [i.name for i in boxd.images.list()])
        with self.assertRaises(boxd.NotFound):
            boxd.images.remove(ref)

    def test_build(self) -> None:
        with boxd.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS) as sb:
            base = sb.info().image
        ref = unique("built")
        dockerfile = f"FROM {base}\nCOPY greet.txt /greet.txt\nRUN cat /greet.txt /greet.txt > /built.txt\n"
        ctx = tar_of({"greet.txt": b"hello\n"})
        r = boxd.images.build(ref, dockerfile, ctx, request_timeout=120)
        try:
            self.assertEqual(r.image.name, ref)
            self.assertEqual([(s.line, s.instruction.split()[0]) for s in r.steps], [(2, "COPY"), (3, "RUN")])
            with boxd.Sandbox.create(image=ref, memory="256m", ttl="10m", labels=LABELS) as sb:
                self.assertEqual(sb.files.read("/built.txt"), b"hello\nhello\n")
            with self.assertRaises(boxd.AlreadyExists):
                boxd.images.build(ref, dockerfile, ctx)
            r2 = boxd.images.build(ref, dockerfile, ctx, force=True, request_timeout=120)
            self.assertEqual([s.cached for s in r2.steps], [True, True])
            with self.assertRaises(boxd.FailedPrecondition) as cm:
                boxd.images.build(unique("fails"), f"FROM {base}\nRUN exit 3\n", request_timeout=120)
            self.assertIn("3", str(cm.exception))
            with self.assertRaises(boxd.InvalidArgument):
                boxd.images.build(unique("bad"), f"FROM {base}\nFROBNICATE x\n")
        finally:
            boxd.images.remove(ref, force=True)

    def test_pools(self) -> None:
        pools = boxd.images.pool_sizes()
        self.assertIsInstance(pools, list)
        with boxd.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS) as sb:
            base = sb.info().image
        before = {p.image: p.size for p in pools}
        p = boxd.images.set_pool_size(base, before.get(base, 0))
        self.assertEqual((p.size, p.runtime), (before.get(base, 0), "runc"))
        p = boxd.images.set_pool_size(base, before.get(base, 0), runtime="runc")
        self.assertEqual((p.image, p.runtime), (base, "runc"))
        with self.assertRaises(boxd.InvalidArgument):
            boxd.images.set_pool_size(base, 0, runtime="no-such-runtime")
        with self.assertRaises(boxd.InvalidArgument):
            boxd.images.set_pool_size(base, -1)
        with self.assertRaises(boxd.NotFound):
            boxd.images.set_pool_size("sdk-py/no-such-image:v1", 1)


class SandboxExtrasTest(unittest.TestCase):
    sb: boxd.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sb = boxd.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.delete()

    def test_commit(self) -> None:
        self.sb.files.write("/workspace/committed.txt", b"in the image")
        ref = unique("commit")
        img = self.sb.commit(ref, message="sdk test")
        try:
            self.assertEqual(img.name, ref)
            self.assertEqual(self.sb.exec(["true"]).exit_code, 0)  # the source runs on
            with boxd.Sandbox.create(image=ref, memory="256m", ttl="10m", labels=LABELS) as sb2:
                self.assertEqual(sb2.files.read("/workspace/committed.txt"), b"in the image")
            with self.assertRaises(boxd.AlreadyExists):
                self.sb.commit(ref)
            with self.assertRaises(boxd.InvalidArgument) as cm:
                self.sb.commit("Bad Ref!")
            self.assertIn("ref", str(cm.exception))
        finally:
            boxd.images.remove(ref, force=True)

    def test_fork(self) -> None:
        self.sb.files.write("/workspace/forked.txt", b"copied")
        forks = self.sb.fork(2, labels={"fork": "yes"})
        try:
            self.assertEqual(len(forks), 2)
            for f in forks:
                self.assertNotEqual(f.id, self.sb.id)
                self.assertEqual(f.files.read("/workspace/forked.txt"), b"copied")
                self.assertEqual(f.info().labels.get("fork"), "yes")
            forks[0].files.write("/workspace/forked.txt", b"changed")
            self.assertEqual(forks[1].files.read("/workspace/forked.txt"), b"copied")
            self.assertEqual(self.sb.files.read("/workspace/forked.txt"), b"copied")
            with self.assertRaises(boxd.InvalidArgument):
                self.sb.fork(1000)
        finally:
            for f in forks:
                f.delete()
        with self.assertRaises(boxd.NotFound):
            boxd.Sandbox.connect(forks[0].id)

    def test_ports(self) -> None:
        self.sb.files.write("/workspace/www/index.html", b"served from the sandbox\n", parents=True)
        proc = self.sb.processes.start(["busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/workspace/www"])
        try:
            p = self.sb.publish_port(8080)
            self.assertEqual((p.host_ip, p.port, p.protocol), ("127.0.0.1", 8080, "tcp"))
            self.assertGreater(p.host_port, 0)
            self.assertIn(p, self.sb.ports())
            body = b""
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:  # until httpd listens
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{p.host_port}/index.html", timeout=5) as resp:
                        body = resp.read()
                        break
                except OSError:
                    time.sleep(0.1)
            self.assertEqual(body, b"served from the sandbox\n")
            self.assertEqual(self.sb.unpublish_port(8080), [p])
            self.assertEqual(self.sb.ports(), [])
            with self.assertRaises(boxd.NotFound):
                self.sb.unpublish_port(8080)
            with self.assertRaises(boxd.InvalidArgument) as cm:
                self.sb.publish_port(70000)
            self.assertIn("port", str(cm.exception))
        finally:
            self.sb.processes.kill(proc.id)

    def test_network_update(self) -> None:
        # A sandbox without network has no allowlist to change (an egress
        # sandbox's update is in boxd's network e2e tests).
        with self.assertRaises(boxd.FailedPrecondition) as cm:
            self.sb.update_network(allow=["10.0.0.1:80"])
        self.assertIn("none", str(cm.exception))
        with self.assertRaises(boxd.InvalidArgument) as cm2:
            self.sb.update_network(allow=["not a host!"])
        self.assertEqual(cm2.exception.field, "allow")

    def test_copy_in_out(self) -> None:
        # docker cp semantics: one top-level entry, unpacked into an existing directory.
        self.sb.copy_in("/workspace", tar_of({"cp/a.txt": b"A" * 3_000_000, "cp/sub/b.txt": b"B"}))
        self.assertEqual(self.sb.files.read("/workspace/cp/sub/b.txt"), b"B")
        st = self.sb.stat_path("/workspace/cp/a.txt")
        self.assertEqual((st.name, st.size, st.is_dir), ("a.txt", 3_000_000, False))
        self.assertTrue(self.sb.stat_path("/workspace/cp").is_dir)
        got = untar(self.sb.copy_out("/workspace/cp"))
        self.assertEqual(got["cp/a.txt"], b"A" * 3_000_000)
        self.assertEqual(got["cp/sub/b.txt"], b"B")
        with self.assertRaises(boxd.NotFound):
            self.sb.copy_out("/workspace/no-such")
        with self.assertRaises(boxd.NotFound):
            self.sb.stat_path("/workspace/no-such")

    def test_exec_output(self) -> None:
        with self.sb.exec_output(["sh", "-c", "echo out; echo err >&2; cat; exit 5"], stdin=b"in\n") as st:
            pieces = list(st)
            self.assertEqual(st.result.exit_code, 5)
        self.assertEqual(b"".join(o.data for o in pieces if o.stream == "stdout"), b"out\nin\n")
        self.assertEqual(b"".join(o.data for o in pieces if o.stream == "stderr"), b"err\n")
        r = self.sb.exec_output(["sh", "-c", "sleep 5"], timeout=0.3).wait()
        self.assertTrue(r.timed_out)
        self.assertEqual(r.exit_code, 124)
        # Leaving early kills the command.
        with self.sb.exec_output(["sh", "-c", "echo started; sleep 60 && touch /workspace/not-killed"]) as st:
            for o in st:
                self.assertEqual(o.data, b"started\n")
                break
        deadline = time.monotonic() + 10
        while "sleep 60" in self.sb.exec(["ps", "-o", "args"]).stdout_text and time.monotonic() < deadline:
            time.sleep(0.05)  # the cancel reaches boxd asynchronously
        self.assertNotIn("sleep 60", self.sb.exec(["ps", "-o", "args"]).stdout_text)
        with self.assertRaises(boxd.NotFound):
            list(boxd.Sandbox(dataclasses.replace(self.sb._info, id="nope"), self.sb._client).exec_output(["true"]))


class AioExtrasTest(unittest.TestCase):
    def test_aio(self) -> None:
        async def main() -> None:
            async with boxd.aio.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS) as sb:
                base = (await sb.info()).image
                await sb.files.write("/workspace/x.txt", b"aio")
                ref = unique("aio-commit")
                img = await sb.commit(ref)
                self.assertEqual(img.name, ref)
                self.assertIn(ref, [i.name for i in await boxd.aio.images.list()])
                await boxd.aio.images.remove(ref)
                with self.assertRaises(boxd.NotFound):
                    await boxd.aio.images.remove(ref)

                forks = await sb.fork(names=["sdk-aio-fork-" + uuid.uuid4().hex[:6]])
                self.assertEqual(await forks[0].files.read("/workspace/x.txt"), b"aio")
                await forks[0].delete()

                await sb.copy_in("/workspace", tar_of({"t/f": b"tar"}))
                self.assertEqual(untar(await sb.copy_out("/workspace/t/f")), {"f": b"tar"})
                self.assertEqual((await sb.stat_path("/workspace/t/f")).size, 3)

                items = [x async for x in sb.exec_output(["sh", "-c", "echo hi; exit 2"])]
                self.assertEqual(items[0], boxd.Output("stdout", b"hi\n"))
                self.assertEqual(items[-1].exit_code, 2)

                p = await sb.publish_port(9000)
                self.assertEqual([x.port for x in await sb.ports()], [9000])
                self.assertEqual(await sb.unpublish_port(host_port=p.host_port), [p])
                with self.assertRaises(boxd.FailedPrecondition):
                    await sb.update_network(allow=["10.0.0.1"])

                ref2 = unique("aio-built")
                r = await boxd.aio.images.build(ref2, f"FROM {base}\nRUN echo built > /b\n", request_timeout=120)
                self.assertEqual(r.image.name, ref2)
                imported = await boxd.aio.images.import_image(tar_of({"r": b"1"}), name=unique("aio-rootfs"),
                                                              rootfs=True)
                for name in (ref2, imported[0].name):
                    await boxd.aio.images.remove(name)
                self.assertIsInstance(await boxd.aio.images.pool_sizes(), list)
                with self.assertRaises(boxd.InvalidArgument):
                    await boxd.aio.images.set_pool_size(base, -1)
            await boxd.aio.default_client().close()

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
