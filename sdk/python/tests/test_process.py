"""Background processes and sessions against a real boxd."""

import time
import unittest

from support import SandboxTest, boxd


class ProcessesTest(SandboxTest):
    def test_start_list_wait(self) -> None:
        p = self.sb.processes.start(["sh", "-c", "echo bg; echo e >&2; sleep 0.5; exit 4"])
        self.assertTrue(p.id)
        self.assertEqual(p.state, "running")
        self.assertGreater(p.pid, 0)
        self.assertIn(p.id, [x.id for x in self.sb.processes.list()])
        done = self.sb.processes.wait(p.id, request_timeout=10)
        self.assertEqual(done.state, "exited")
        self.assertEqual(done.result.exit_code, 4)
        self.assertEqual(self.sb.processes.get(p.id).state, "exited")
        # Attach to an exited process: its buffered output and result.
        with self.sb.processes.attach(p.id) as a:
            r = a.wait()
        self.assertEqual(a.process.id, p.id)
        self.assertEqual((r.stdout, r.stderr, r.exit_code), (b"bg\n", b"e\n", 4))

    def test_kill(self) -> None:
        p = self.sb.processes.start(["sleep", "35"])
        self.sb.processes.kill(p.id)
        done = self.sb.processes.wait(p.id, request_timeout=10)
        self.assertEqual(done.result.signal, "SIGKILL")
        with self.assertRaises(boxd.FailedPrecondition):
            self.sb.processes.kill(p.id)
        with self.assertRaises(boxd.NotFound):
            self.sb.processes.wait("p999999")
        with self.assertRaises(boxd.NotFound):
            self.sb.processes.get("p999999")

    def test_attach_follow_and_stdin(self) -> None:
        p = self.sb.processes.start(["sh", "-c", "echo ready; read x; echo got $x"], keep_stdin_open=True)
        self.assertTrue(p.stdin_open)
        with self.sb.processes.attach(p.id, stdin=boxd.PIPE) as a:
            it = iter(a)
            self.assertEqual(next(it).data, b"ready\n")
            a.write(b"42\n")
            self.assertEqual(next(it).data, b"got 42\n")
            r = a.wait()
        self.assertEqual(r.exit_code, 0)

    def test_detach_leaves_running(self) -> None:
        p = self.sb.processes.start(["sh", "-c", "echo one; sleep 36"])
        time.sleep(0.3)
        with self.sb.processes.attach(p.id, follow=False) as a:
            got = b"".join(o.data for o in a)
        self.assertEqual(got, b"one\n")
        self.assertIsNone(a.result)
        with self.sb.processes.attach(p.id) as a:
            self.assertEqual(next(iter(a)).data, b"one\n")
        self.assertEqual(self.sb.processes.get(p.id).state, "running")
        self.sb.processes.kill(p.id)

    def test_start_bad_input(self) -> None:
        with self.assertRaises(boxd.InvalidArgument):
            self.sb.processes.start(["true"], user="no-such-user")
        with self.assertRaises(ValueError):
            self.sb.processes.start([])


class SessionsTest(SandboxTest):
    def test_state_persists(self) -> None:
        s = self.sb.sessions.create("work", env={"X": "1"}, workdir="/tmp")
        self.assertEqual(s.name, "work")
        s.exec("mkdir -p /tmp/s && cd /tmp/s && export Y=2; f() { echo fn; }")
        r = s.exec("pwd; echo $X$Y; f; echo err >&2; false")
        self.assertEqual(r.stdout, b"/tmp/s\n12\nfn\n")
        self.assertEqual(r.stderr, b"err\n")
        self.assertEqual(r.exit_code, 1)
        self.assertIn("work", [x.name for x in self.sb.sessions.list()])
        self.assertEqual(self.sb.sessions.get("work").info.commands, 2)
        with self.assertRaises(boxd.AlreadyExists):
            self.sb.sessions.create("work")
        s.delete()
        self.assertNotIn("work", [x.name for x in self.sb.sessions.list()])
        with self.assertRaises(boxd.NotFound):
            s.exec("true")

    def test_timeout_and_end(self) -> None:
        s = self.sb.sessions.create("t")
        s.exec("cd /tmp")
        r = s.exec("sleep 37", timeout=0.5)
        self.assertTrue(r.timed_out)
        self.assertEqual(r.exit_code, 124)
        self.assertFalse(r.session_restarted)
        self.assertEqual(s.exec("pwd").stdout, b"/tmp\n")
        r = s.exec("exit 3")
        self.assertTrue(r.session_ended)
        with self.assertRaises(boxd.InvalidArgument):
            self.sb.sessions.create("bad name!")


if __name__ == "__main__":
    unittest.main()
