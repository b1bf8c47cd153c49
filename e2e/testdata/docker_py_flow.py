"""A sandbox wrapper's flow with docker-py (Debian's python3-docker),
pointed at boxd's Docker endpoint: e2e TestDockerPy runs it."""
import io
import sys
import tarfile

import docker

IMAGE = "boxd/busybox:latest"
c = docker.DockerClient(base_url="unix://" + sys.argv[1])
assert c.ping()

ct = c.containers.run(IMAGE, ["sh", "-c", "echo out; echo err >&2; sleep 300"], detach=True,
                      labels={"boxd.test": "py"}, mem_limit="64m", nano_cpus=500000000, pids_limit=64)
ct.reload()
assert ct.status == "running", ct.status
hc = ct.attrs["HostConfig"]
assert (hc["Memory"], hc["NanoCpus"], hc["PidsLimit"]) == (64 << 20, 500000000, 64), hc

r = ct.exec_run(["sh", "-c", "echo O; echo E >&2; exit 3"], demux=True)
assert r.exit_code == 3 and r.output == (b"O\n", b"E\n"), r

buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tf:
    data = b"hello from docker-py\n"
    ti = tarfile.TarInfo("f.txt")
    ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data))
assert ct.put_archive("/tmp", buf.getvalue())
bits, stat = ct.get_archive("/tmp/f.txt")
with tarfile.open(fileobj=io.BytesIO(b"".join(bits))) as tf:
    assert tf.extractfile("f.txt").read() == data
assert stat["name"] == "f.txt" and stat["size"] == len(data), stat

assert ct.logs(stdout=True, stderr=False) == b"out\n", ct.logs(stdout=True, stderr=False)
assert ct.logs(stdout=False, stderr=True) == b"err\n"
assert [x.id for x in c.containers.list(filters={"label": "boxd.test=py"})] == [ct.id]
assert c.containers.list(filters={"label": "boxd.test=other"}) == []

ct.stop(timeout=1)
ct.reload()
assert ct.status == "exited", ct.status
ct.remove()
assert c.containers.list(all=True) == []

refused = [
    ({"privileged": True}, "HostConfig.Privileged"),
    ({"cap_add": ["SYS_ADMIN"]}, "HostConfig.CapAdd"),
    ({"network_mode": "host"}, "HostConfig.NetworkMode"),
    ({"pid_mode": "host"}, "HostConfig.PidMode"),
    ({"ipc_mode": "host"}, "HostConfig.IpcMode"),
    ({"devices": ["/dev/null:/dev/x:rwm"]}, "HostConfig.Devices"),
    ({"cgroup_parent": "/x"}, "HostConfig.CgroupParent"),
    ({"volumes_from": ["other"]}, "HostConfig.VolumesFrom"),
    ({"oom_kill_disable": True}, "HostConfig.OomKillDisable"),
    ({"security_opt": ["seccomp=unconfined"]}, "HostConfig.SecurityOpt"),
    ({"sysctls": {"net.ipv4.ip_forward": "1"}}, "HostConfig.Sysctls"),
    ({"runtime": "nvidia"}, "HostConfig.Runtime"),
    ({"volumes": ["/etc:/hostetc"]}, "HostConfig.Binds[0]"),  # no --allow-bind
    ({"restart_policy": {"Name": "always"}}, "HostConfig.RestartPolicy"),
]
for kw, field in refused:
    try:
        c.containers.create(IMAGE, "true", **kw)
    except docker.errors.APIError as e:
        assert e.status_code == 400 and (field + ":") in str(e.explanation), (kw, e.status_code, e.explanation)
    else:
        raise AssertionError("%s was not refused" % kw)
assert c.containers.list(all=True) == []
print("ok")
