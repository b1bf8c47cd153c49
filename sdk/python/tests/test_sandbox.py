"""Sandbox lifecycle, exec and errors against a real boxd."""

import os
import tempfile
import threading
import time
import unittest
import uuid

from boxd.v1 import boxd_pb2
from support import IMAGE, LABELS, SandboxTest, boxd


class LifecycleTest(unittest.TestCase):
    def test_create_context_manager_deletes(self) -> None:
        name = "py-" + uuid.uuid4().hex[:8]
        with boxd.Sandbox.create(image=IMAGE, memory="64m", cpus=0.5, pids=64, ttl=600, name=name,
                                 env={"MODE": "test"}, labels=LABELS) as sb:
            info = sb.info()
            self.assertEqual(info.name, name)
            self.assertEqual(info.memory_bytes, 64 << 20)
            self.assertEqual(info.state, "running")
            self.assertIn("MODE=test", info.env)
            self.assertIsNotNone(info.usage)
            self.assertIn(sb.id, [s.id for s in boxd.list()])
            self.assertIn(sb.id, [s.id for s in boxd.list(labels=LABELS)])
            self.assertNotIn(sb.id, [s.id for s in boxd.list(labels={"sdk-test": "other"})])
            by_id = boxd.Sandbox.connect(sb.id)
            by_name = boxd.Sandbox.connect(name)
            self.assertEqual(by_name.id, sb.id)
            self.assertEqual(by_id.exec(["sh", "-c", "echo $MODE"]).stdout, b"test\n")
            with self.assertRaises(boxd.AlreadyExists):
                boxd.Sandbox.create(image=IMAGE, name=name, labels=LABELS)
        with self.assertRaises(boxd.NotFound):
            boxd.Sandbox.connect(sb.id)
        self.assertNotIn(sb.id, [s.id for s in boxd.list()])

    def test_settings(self) -> None:
        with boxd.Sandbox.create(image=IMAGE, user="sandbox", hostname="py-box", tmpfs=["/cache:4m"],
                                 ulimits=["nofile=512"], labels=LABELS) as sb:
            out = sb.exec(["sh", "-c", "id -u; hostname; ulimit -n; grep ' /cache ' /proc/mounts | grep -c size=4096k"])
            self.assertEqual(out.stdout, b"1000\npy-box\n512\n1\n")
        with self.assertRaises(boxd.InvalidArgument) as cm:
            boxd.Sandbox.create(image=IMAGE, ulimits=["nofile=lots"], labels=LABELS)
        self.assertIn("ulimits", str(cm.exception))

    def test_every_create_option(self) -> None:
        # The settings sdk/create-options.json lists for Python, on a real
        # boxd, as GetSandbox reports them (the egress network needs its
        # own topology: test_create_options checks its mapping).
        with boxd.Sandbox.create(image=IMAGE, memory="256m", cpus=0.5, pids=200, disk="64m", env={"MODE": "all"},
                                 workdir="/tmp", labels=LABELS, name="py-all-options", ttl="10m", user="sandbox",
                                 read_only=True, tmpfs=["/cache:4m"], ulimits=["nofile=512", "nproc=300"],
                                 hostname="py-all", cpu_weight=300, memory_low="32m", exec_timeout="20s",
                                 output_limit=1000, idle_timeout="10m", on_idle="delete", runtime="runc",
                                 cold=True, replace=True, pull="never") as sb:
            out = sb.exec(["sh", "-c", "id -u; hostname; ulimit -n; echo $MODE; pwd; touch /x 2>/dev/null || echo ro"])
            self.assertEqual(out.stdout, b"1000\npy-all\n512\nall\n/tmp\nro\n")
            self.assertEqual(len(sb.exec(["head", "-c", "5000", "/dev/zero"]).stdout), 1000)
            c = sb._client
            got = c.unary(c.sandbox.GetSandbox, boxd_pb2.GetSandboxRequest(id=sb.id)).sandbox
            self.assertEqual((got.name, got.memory_bytes, got.cpus, got.pids, got.disk_bytes, got.workdir),
                             ("py-all-options", 256 << 20, 0.5, 200, 64 << 20, "/tmp"))
            self.assertEqual((got.user, got.hostname, got.security.read_only_rootfs, got.ulimits.nofile,
                              got.ulimits.nproc), ("sandbox", "py-all", True, 512, 300))
            self.assertIn("/cache", [m.path for m in got.tmpfs])
            self.assertEqual((got.cpu_weight, got.memory_low_bytes, got.exec_timeout, got.output_limit),
                             (300, 32 << 20, "20s", 1000))
            self.assertEqual((got.idle_timeout, got.on_idle, got.runtime), ("10m0s", "delete", "runc"))
            self.assertIn("MODE=all", got.env)
            self.assertEqual(got.labels.get("sdk-test"), "python")

    def test_connect_unknown(self) -> None:
        with self.assertRaises(boxd.NotFound) as cm:
            boxd.Sandbox.connect("nosuchsandbox")
        self.assertEqual(cm.exception.code, "not_found")
        self.assertIn("nosuchsandbox", str(cm.exception))

    def test_invalid_argument_names_field(self) -> None:
        with self.assertRaises(boxd.InvalidArgument) as cm:
            boxd.Sandbox.create(image=IMAGE, memory="12xb", labels=LABELS)
        self.assertEqual(cm.exception.field, "limits.memory")
        with self.assertRaises(boxd.InvalidArgument) as cm:
            boxd.Sandbox.create(image=IMAGE, ttl="forever", labels=LABELS)
        self.assertEqual(cm.exception.field, "ttl")

    def test_dead_socket(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            dead = os.path.join(d, "boxd.sock")
            c = boxd.Client(dead)
            t = time.monotonic()
            with self.assertRaises(boxd.Unavailable) as cm:
                boxd.list(client=c)
            self.assertLess(time.monotonic() - t, 5)
            self.assertIn(dead, str(cm.exception))
            with self.assertRaises(boxd.Unavailable):
                boxd.Sandbox.create(client=c)
            # A socket file nobody listens on.
            import socket

            s = socket.socket(socket.AF_UNIX)
            s.bind(dead)
            s.close()
            with self.assertRaises(ConnectionError):  # Unavailable is a ConnectionError
                boxd.Sandbox.connect("x", client=boxd.Client(dead))
            c.close()

    def test_sandbox_deleted_during_streams(self) -> None:
        sb = boxd.Sandbox.create(image=IMAGE, labels=LABELS)
        sb.files.mkdir("/tmp/w")
        ex = sb.exec_stream(["sh", "-c", "echo up; sleep 60"])
        it = iter(ex)
        self.assertEqual(next(it).data, b"up\n")
        watch = sb.files.watch("/tmp/w")
        outcome = {}

        def drain(name, iterable) -> None:
            try:
                for _ in iterable:
                    pass
                outcome[name] = "ended"
            except boxd.BoxdError as e:
                outcome[name] = e

        ts = [threading.Thread(target=drain, args=("exec", it)), threading.Thread(target=drain, args=("watch", watch))]
        for t in ts:
            t.start()
        time.sleep(0.2)
        boxd.Sandbox.connect(sb.id).delete()
        for t in ts:
            t.join(20)
            self.assertFalse(t.is_alive(), "a stream hung after its sandbox was deleted")
        # Either a typed error or the end of the stream (with a result for the exec).
        self.assertTrue(isinstance(outcome["exec"], boxd.BoxdError) or ex.result is not None, outcome)
        with self.assertRaises(boxd.NotFound):
            sb.exec(["true"])

    def test_default_socket_from_env(self) -> None:
        self.assertEqual(boxd.default_socket(), os.environ["BOXD_SOCKET"])
        self.assertEqual(boxd.Client().socket, os.environ["BOXD_SOCKET"])


class ExecTest(SandboxTest):
    def test_exit_code_and_output(self) -> None:
        r = self.sb.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=5)
        self.assertEqual(r.exit_code, 3)
        self.assertEqual(r.stdout, b"out\n")
        self.assertEqual(r.stderr, b"err\n")
        self.assertEqual(r.stdout_text, "out\n")
        self.assertFalse(r.timed_out)
        self.assertFalse(r.truncated)
        self.assertFalse(r.ok)
        self.assertTrue(self.sb.exec(["true"]).ok)
        r = self.sb.exec(["sh", "-c", "echo $$; sleep 0.2"])
        self.assertEqual(r.pid, int(r.stdout))
        self.assertGreaterEqual(r.process_usec, 200_000)  # the init's fork to reaping
        self.assertFalse(r.oom_killed)

    def test_delete_background(self) -> None:
        sb = boxd.Sandbox.create(image=IMAGE, labels=LABELS)
        sb.exec(["sh", "-c", "trap '' TERM; sleep 60 >/dev/null 2>&1 &"])
        sb.delete(timeout=5, background=True)  # returns before the grace period ends
        with self.assertRaises(boxd.NotFound):
            boxd.Sandbox.connect(sb.id)
        self.assertNotIn(sb.id, [s.id for s in boxd.list()])

    def test_shell_string(self) -> None:
        self.assertEqual(self.sb.exec("echo $((6*7))").stdout_text, "42\n")

    def test_non_utf8_bytes(self) -> None:
        r = self.sb.exec(["sh", "-c", r"printf '\377\376\000a'; printf '\300' >&2"])
        self.assertEqual(r.stdout, b"\xff\xfe\x00a")
        self.assertEqual(r.stderr, b"\xc0")
        self.assertEqual(r.stdout_text, "\ufffd\ufffd\x00a")
        # The same bytes through the streaming path.
        got = b"".join(o.data for o in self.sb.exec_stream(["sh", "-c", r"printf '\377\376\000a'"]))
        self.assertEqual(got, b"\xff\xfe\x00a")

    def test_timeout(self) -> None:
        t = time.monotonic()
        r = self.sb.exec(["sh", "-c", "echo started; sleep 30"], timeout=0.5)
        self.assertLess(time.monotonic() - t, 10)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.exit_code, 124)
        self.assertEqual(r.stdout, b"started\n")
        self.assertNotIn("sleep 30", self.ps())

    def test_request_timeout_cancels_server_work(self) -> None:
        t = time.monotonic()
        with self.assertRaises(boxd.DeadlineExceeded):
            self.sb.exec(["sh", "-c", "sleep 31"], request_timeout=1)
        self.assertLess(time.monotonic() - t, 5)
        time.sleep(0.3)
        self.assertNotIn("sleep 31", self.ps())
        # Streaming path too.
        with self.assertRaises(boxd.DeadlineExceeded):
            self.sb.exec(["sh", "-c", "sleep 32"], stdin=iter([b"x"]), request_timeout=1)
        time.sleep(0.3)
        self.assertNotIn("sleep 32", self.ps())
        # A client-wide default.
        c = boxd.Client(timeout=0.5)
        sb = boxd.Sandbox.connect(self.sb.id, client=c)
        with self.assertRaises(boxd.DeadlineExceeded):
            sb.exec(["sleep", "33"])
        c.close()

    def test_truncated(self) -> None:
        r = self.sb.exec(["sh", "-c", "head -c 100000 /dev/zero"], output_limit=1000)
        self.assertTrue(r.truncated)
        self.assertLessEqual(len(r.stdout), 1000)

    def test_env_workdir_user(self) -> None:
        r = self.sb.exec(["sh", "-c", "echo $A; pwd"], env={"A": "1"}, workdir="/tmp")
        self.assertEqual(r.stdout, b"1\n/tmp\n")
        r = self.sb.exec(["id", "-u"], user="65534")
        self.assertEqual(r.stdout, b"65534\n")

    def test_unknown_sandbox(self) -> None:
        sb = boxd.Sandbox(self.sb._info, self.sb._client)
        sb.id = "nosuchsandbox"
        with self.assertRaises(boxd.NotFound):
            sb.exec(["true"])
        with self.assertRaises(boxd.NotFound):
            list(sb.exec_stream(["true"]))
        with self.assertRaises(boxd.NotFound):
            sb.files.read("/etc/passwd")

    def test_missing_command(self) -> None:
        r = self.sb.exec(["/no/such/command"])
        self.assertEqual(r.exit_code, 127)

    def test_stdin(self) -> None:
        self.assertEqual(self.sb.exec(["cat"], stdin=b"abc").stdout, b"abc")
        self.assertEqual(self.sb.exec(["cat"], stdin="é").stdout, "é".encode())
        big = os.urandom(3 << 20)
        r = self.sb.exec(["sh", "-c", "cat | md5sum"], stdin=(big[i:i + 65536] for i in range(0, len(big), 65536)))
        import hashlib

        self.assertEqual(r.stdout_text.split()[0], hashlib.md5(big).hexdigest())

    def test_callbacks(self) -> None:
        out, err = [], []
        r = self.sb.exec(["sh", "-c", "echo a; echo b >&2; echo c"], on_stdout=out.append, on_stderr=err.append)
        self.assertEqual(b"".join(out), b"a\nc\n")
        self.assertEqual(b"".join(err), b"b\n")
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.stdout, b"")  # given to the callback, not kept

    def test_stream_iterator(self) -> None:
        t0 = time.monotonic()
        times = []
        with self.sb.exec_stream(["sh", "-c", "echo one; sleep 1; echo two >&2; exit 5"]) as ex:
            got = []
            for o in ex:
                got.append((o.stream, o.data))
                times.append(time.monotonic() - t0)
        self.assertEqual(got, [("stdout", b"one\n"), ("stderr", b"two\n")])
        self.assertLess(times[0], 0.9, "the first line must arrive before the command ends")
        self.assertEqual(ex.result.exit_code, 5)

    def test_pipe_and_signal(self) -> None:
        with self.sb.exec_stream(["sh", "-c", "read x; echo got $x; cat"], stdin=boxd.PIPE) as ex:
            ex.write(b"hello\n")
            it = iter(ex)
            self.assertEqual(next(it).data, b"got hello\n")
            ex.write("more\n")
            self.assertEqual(next(it).data, b"more\n")
            ex.close_stdin()
            r = ex.wait()
        self.assertEqual(r.exit_code, 0)
        with self.sb.exec_stream(["sh", "-c", "trap 'echo int; exit 7' INT; echo ready; while :; do sleep 0.1; done"],
                                 stdin=boxd.PIPE) as ex:
            it = iter(ex)
            self.assertEqual(next(it).data, b"ready\n")
            ex.signal("SIGINT")
            r = ex.wait()
        self.assertEqual(r.stdout, b"int\n")
        self.assertEqual(r.exit_code, 7)

    def test_leaving_stream_kills(self) -> None:
        with self.sb.exec_stream(["sh", "-c", "echo up; sleep 34"]) as ex:
            self.assertEqual(next(iter(ex)).data, b"up\n")
        deadline = time.monotonic() + 5
        while "sleep 34" in self.ps() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertNotIn("sleep 34", self.ps())

    def test_concurrent_execs(self) -> None:
        results = {}

        def run(i: int) -> None:
            results[i] = self.sb.exec(["sh", "-c", f"echo {i}"]).stdout

        ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        self.assertEqual(results, {i: f"{i}\n".encode() for i in range(8)})


if __name__ == "__main__":
    unittest.main()
