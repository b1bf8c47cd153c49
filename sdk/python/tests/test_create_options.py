"""Sandbox.create's options against sdk/create-options.json: every option
the file names for Python sets the CreateSandboxRequest field it names (no
daemon needed; mcpserver's TestCreateOptionsReachable checks the file
covers every field)."""

import inspect
import json
import os
import unittest

import support  # noqa: F401  (puts the SDK on sys.path)
from boxd import aio
from boxd.sandbox import Sandbox, create_request
from boxd.types import PublishedPort
from boxd.v1 import boxd_pb2
from google.protobuf.descriptor import FieldDescriptor

OPTIONS = os.path.join(os.path.dirname(__file__), "..", "..", "create-options.json")
NONE = dict(memory=None, cpus=None, pids=None, env=None, workdir=None, labels=None, name=None, ttl=None,
            user=None, read_only=False, tmpfs=(), ulimits=(), hostname=None, replace=False)


def python_options():
    with open(OPTIONS) as f:
        fields = json.load(f)["fields"]
    return {path: names["python"] for path, names in fields.items() if not names["python"].startswith("excluded:")}


def field_of(path):
    desc, fd = boxd_pb2.CreateSandboxRequest.DESCRIPTOR, None
    for part in path.split("."):
        fd = desc.fields_by_name[part]
        desc = fd.message_type
    return fd


def sample(fd):
    """A value of fd's type that is not its default."""
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        return {"k": "v"}
    one = {FieldDescriptor.TYPE_STRING: "7m", FieldDescriptor.TYPE_BOOL: True, FieldDescriptor.TYPE_DOUBLE: 1.5}
    v = one.get(fd.type, 7)
    if fd.label == FieldDescriptor.LABEL_REPEATED:
        return ["a=b"]
    return v


def got(req, path):
    parts = path.split(".")
    msg = req
    for p in parts[:-1]:
        msg = getattr(msg, p)
        if parts[0] == "publish":
            msg = msg[0]
    v = getattr(msg, parts[-1])
    return dict(v) if hasattr(v, "items") else ([*v] if hasattr(v, "extend") else v)


class CreateOptionsTest(unittest.TestCase):
    def test_each_option_sets_its_field(self) -> None:
        params = inspect.signature(Sandbox.create).parameters
        aio_params = inspect.signature(aio.Sandbox.create).parameters
        for path, name in python_options().items():
            fd = field_of(path)
            opt, _, key = name.partition(".")
            self.assertIn(opt, params, f"{path}: Sandbox.create has no {opt}")
            self.assertIn(opt, aio_params, f"{path}: aio.Sandbox.create has no {opt}")
            v = sample(fd)
            if opt == "publish":
                kw = {"publish": [PublishedPort(**{"host_ip": "", "host_port": 0, "port": 0, "protocol": "", key: v})]}
            elif opt == "auth":
                kw = {"auth": {key: v}}
            elif opt == "network":
                v = "egress"
                kw = {"network": v}
            elif opt == "image":
                kw = {"image": v}
            else:
                kw = {opt: v}
            args = {**NONE, **kw}
            req = create_request(args.pop("image", None), **args)
            self.assertEqual(got(req, path), v, f"{path} from {name}={v!r}")

    def test_network_mapping(self) -> None:
        def net(**kw):
            req = create_request(None, **{**NONE, **kw})
            return (req.HasField("network"), req.network.mode, [*req.network.allow])

        self.assertEqual(net(), (False, "", []))
        self.assertEqual(net(allow=["api.example.com:443"]), (True, "egress", ["api.example.com:443"]))
        self.assertEqual(net(allow=[]), (True, "egress", []))
        self.assertEqual(net(network="egress"), (True, "egress", []))
        self.assertEqual(net(network="none"), (True, "none", []))
        self.assertEqual(net(network="egress", allow=["*:443"]), (True, "egress", ["*:443"]))

    def test_sizes_and_durations_as_the_cli(self) -> None:
        req = create_request(None, **{**NONE, "disk": "2g", "memory_low": 64 << 20, "idle_timeout": 90,
                                      "exec_timeout": "30m", "ttl": "1h"})
        self.assertEqual((req.limits.disk, req.memory_low, req.idle_timeout, req.exec_timeout, req.ttl),
                         ("2g", str(64 << 20), "90000ms", "30m", "1h"))


if __name__ == "__main__":
    unittest.main()


class ForkOptionsTest(unittest.TestCase):
    """Sandbox.fork (and aio's) take every ForkSandboxRequest field."""

    def test_each_fork_field_has_an_option(self) -> None:
        from boxd.sandbox import fork_request
        for fork in (Sandbox.fork, aio.Sandbox.fork):
            params = inspect.signature(fork).parameters
            for fd in boxd_pb2.ForkSandboxRequest.DESCRIPTOR.fields:
                names = {"sandbox_id": [], "limits": ["memory", "cpus", "pids"]}.get(fd.name, [fd.name])
                for n in names:
                    self.assertIn(n, params, f"{fork.__qualname__} has no {n} ({fd.name})")
        req = fork_request("sb", 0, names=(), memory=None, cpus=None, pids=None, env=None, workdir=None,
                           labels=None, ttl=None, clone_volumes=True, share_volumes=True, with_processes=True)
        self.assertTrue(req.clone_volumes)
        self.assertTrue(req.share_volumes)
        self.assertTrue(req.with_processes)
