"""A file backend for an agent framework (deepagents' sandbox backend) on boxd.

The backend is the sandbox side of an agent framework: execute shell commands
with a timeout (exit 124 and a [TIMEOUT] note when it passes), upload and
download files with an error per file instead of failing the batch, and
close the container at the end. Its base class implements the agent's file
tools (ls, read, write, edit, grep, glob) by running shell pipelines
through execute; boxd.integrations.BoxdSandbox does each in one call that
boxd's init serves inside the sandbox, and kills a timed-out command's
whole process tree instead of relying on timeout(1).

Run: BOXD_SOCKET=/run/boxd/boxd.sock python3 agent_file_backend.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from boxd.integrations import BoxdSandbox  # noqa: E402


def main() -> int:
    image = os.environ.get("BOXD_TEST_IMAGE") or None
    with BoxdSandbox(image=image, memory="512m", pids=256, environment={"MODE": "agent"},
                     default_timeout=300, labels={"example": "agent_file_backend"}) as backend:
        print(f"sandbox {backend.id}")

        r = backend.execute('echo "mode=$MODE in $(pwd)"; echo warn >&2; exit 2')
        print(f"execute: exit {r.exit_code} {r.output!r}")
        assert (r.exit_code, r.output) == (2, "mode=agent in /workspace\nwarn\n"), r

        r = backend.execute("sleep 60", timeout=1)
        print(f"timeout: exit {r.exit_code} {r.output.strip()!r}")
        assert r.exit_code == 124 and "[TIMEOUT]" in r.output, r

        up = backend.upload_files([("/workspace/src/app.py", b"def answer():\n    return 41\n"),
                                   ("/workspace/src/data.bin", bytes(range(256))),
                                   ("/proc/denied.txt", b"x")])
        print("upload:", [(u.path, u.error) for u in up])
        assert [u.error for u in up[:2]] == [None, None] and up[2].error, up

        down = backend.download_files(["/workspace/src/data.bin", "/workspace/src/missing.py"])
        print("download:", [(d.path, len(d.content or b""), d.error) for d in down])
        assert down[0].content == bytes(range(256)) and down[1].error == "file_not_found", down

        # The agent's file tools.
        print(backend.read("/workspace/src/app.py"))
        e = backend.edit("/workspace/src/app.py", "return 41", "return 42")
        assert e.error is None and e.occurrences == 1, e
        assert backend.write("/workspace/src/app.py", "clobber").error, "write must not replace a file"
        assert backend.write("/workspace/tests/test_app.py", "from app import answer\n").error is None
        print("glob:", [f["path"] for f in backend.glob_info("**/*.py", path="/workspace")])
        print("grep:", backend.grep_raw("answer", path="/workspace"))
        assert [m["line"] for m in backend.grep_raw("answer", path="/workspace", glob="*.py")] == [1, 1]
        r = backend.execute("cd src && python3 -c 'import app; print(app.answer())' 2>/dev/null || sed -n 2p app.py")
        assert "42" in r.output, r
        print(f"after edit: {r.output.strip()}")
        sid = backend.id

    # close() removed the sandbox.
    from boxd import NotFound, Sandbox

    try:
        Sandbox.connect(sid)
        raise AssertionError("the sandbox outlived close()")
    except NotFound:
        pass
    print("agent_file_backend OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
