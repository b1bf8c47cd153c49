"""An agent's sandbox: a Docker-style DockerSandbox class on boxd.

The class keeps one long-running container per agent: start it (removing an old
one of the same name), write files into it (parents created), run shell
commands with a timeout returning (exit_code, combined output) with 124 on
timeout, and remove it at the end. Here the same class is a few lines over
the boxd SDK, with no network by default instead of a Docker bridge, and a
timeout that kills the command's whole process tree instead of abandoning
the socket.

Run: BOXD_SOCKET=/run/boxd/boxd.sock python3 agent_sandbox.py
"""

from __future__ import annotations

import os
import posixpath
import sys
from typing import Dict, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import boxd  # noqa: E402


class BoxdSandbox:
    """The DockerSandbox surface: start, stop, write_file, exec."""

    def __init__(self, container_name: str, image: Optional[str] = None,
                 environment: Optional[Dict[str, str]] = None, working_dir: str = "/workspace",
                 memory: str = "512m") -> None:
        self.container_name = container_name
        self._image = image
        self._env = environment or {}
        self._working_dir = working_dir
        self._memory = memory
        self._sb: Optional[boxd.Sandbox] = None

    def __enter__(self) -> "BoxdSandbox":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        """Starts the sandbox; one of the same name is removed first so that
        re-runs start clean."""
        try:
            boxd.Sandbox.connect(self.container_name).delete()
        except boxd.NotFound:
            pass
        self._sb = boxd.Sandbox.create(image=self._image, name=self.container_name, env=self._env,
                                       workdir=self._working_dir, memory=self._memory, ttl="1h",
                                       labels={"example": "agent_sandbox"})

    def stop(self) -> None:
        if self._sb is not None:
            try:
                self._sb.delete()
            except boxd.NotFound:
                pass
            self._sb = None

    def write_file(self, path: str, content: str) -> None:
        """Writes content to path (relative to the working dir), creating
        parent directories."""
        if self._sb is None:
            raise RuntimeError("Sandbox is not running.")
        if not posixpath.isabs(path):
            path = posixpath.join(self._working_dir, path)
        self._sb.files.write(path, content, parents=True)

    def exec(self, command: str, timeout: int = 120) -> Tuple[int, str]:
        """Runs a shell command; returns (exit_code, stdout+stderr). A
        timeout gives 124, like timeout(1)."""
        if self._sb is None:
            return 1, "Sandbox is not running."
        try:
            r = self._sb.exec(["sh", "-c", command], timeout=timeout)
        except boxd.BoxdError as e:
            return 1, f"Error running command in sandbox: {e}"
        if r.timed_out:
            return 124, f"Command timed out after {timeout}s"
        return r.exit_code, (r.stdout + r.stderr).decode("utf-8", errors="replace")


def main() -> int:
    image = os.environ.get("BOXD_TEST_IMAGE") or None
    with BoxdSandbox("agent-sandbox-example", image=image, environment={"GREETING": "hello"}) as sb:
        sb.start()
        sb.start()  # a re-run replaces the sandbox of the same name
        sb.write_file("pkg/main.sh", 'echo "$GREETING from $(pwd)"; echo oops >&2; exit 3\n')
        code, out = sb.exec("sh pkg/main.sh")
        print(f"exit {code}: {out!r}")
        assert code == 3 and out == "hello from /workspace\noops\n", (code, out)
        code, out = sb.exec("sleep 30", timeout=1)
        print(f"exit {code}: {out!r}")
        assert code == 124, (code, out)
        code, out = sb.exec("ping -c1 -W1 10.0.0.1 || echo no network")
        assert "no network" in out, out
    try:
        boxd.Sandbox.connect("agent-sandbox-example")
        raise AssertionError("the sandbox outlived stop()")
    except boxd.NotFound:
        pass
    print("agent_sandbox OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
