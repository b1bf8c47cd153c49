"""Shared set-up: the tests run against the boxd at $BOXD_SOCKET (the e2e
harness, e2e/sdk_python_test.go, starts one on a private containerd) and use
the image $BOXD_TEST_IMAGE (default: the daemon's default image)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import boxd  # noqa: E402

IMAGE = os.environ.get("BOXD_TEST_IMAGE") or None
LABELS = {"sdk-test": "python"}


class SandboxTest(unittest.TestCase):
    """One sandbox for the whole class, deleted at the end."""

    sb: boxd.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        if not os.environ.get("BOXD_SOCKET"):
            raise RuntimeError("BOXD_SOCKET must name the test daemon's socket")
        cls.sb = boxd.Sandbox.create(image=IMAGE, memory="256m", ttl="10m", labels=LABELS)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sb.delete()

    def ps(self) -> str:
        return self.sb.exec(["ps", "-o", "args"]).stdout_text
