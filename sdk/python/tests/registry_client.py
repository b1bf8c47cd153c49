"""Pull and push through the Python SDK (sync and asyncio) against a real
registry: e2e TestSDKRegistry starts Debian's docker-registry on loopback
with TLS and basic auth, and a boxd that trusts its CA, then runs this with
REGISTRY_HOST, REGISTRY_USER and REGISTRY_PASSWORD set. Prints OK at the
end; any failure raises."""

import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import boxd  # noqa: E402
import boxd.aio  # noqa: E402

HOST = os.environ["REGISTRY_HOST"]
AUTH = {"username": os.environ["REGISTRY_USER"], "password": os.environ["REGISTRY_PASSWORD"]}
IMAGE = os.environ["BOXD_TEST_IMAGE"]


def expect(exc: type, fn, *args, **kw) -> BaseException:  # type: ignore[no-untyped-def]
    try:
        fn(*args, **kw)
    except exc as e:
        return e
    raise AssertionError(f"{fn.__name__}{args} did not raise {exc.__name__}")


def main() -> None:
    ref = f"{HOST}/sdk/python:v1"
    # Anonymous and wrong-password pushes are refused, typed.
    e = expect(boxd.PermissionDenied, boxd.images.push, ref, source=IMAGE)
    assert HOST in str(e), e
    expect(boxd.PermissionDenied, boxd.images.push, ref, source=IMAGE, auth={"username": AUTH["username"], "password": "wrong"})
    expect(ValueError, boxd.images.push, ref, source=IMAGE, auth={"user": "x"})

    phases = []
    digest = boxd.images.push(ref, source=IMAGE, auth=AUTH, on_progress=lambda p: phases.append(p.phase))
    assert digest.startswith("sha256:"), digest
    print("pushed", ref, digest, "phases", sorted(set(phases)))

    blobs = []
    img = boxd.images.pull(ref, auth=AUTH, on_progress=lambda p: blobs.extend(b.kind for b in p.blobs))
    assert (img.name, img.digest) == (ref, digest), img
    assert "layer" in blobs, blobs
    assert img.labels.get("boxd.io/pulled-from") == f"{ref}@{digest}", img.labels
    with boxd.Sandbox.create(image=ref, memory="128m", ttl="5m") as sb:
        r = sb.exec(["echo", "pulled"])
        assert r.stdout == b"pulled\n", r
    # A pull of the same digest again: up to date.
    again = boxd.images.pull(ref, auth=AUTH)
    assert again.digest == digest
    expect(boxd.NotFound, boxd.images.pull, f"{HOST}/sdk/python:no-such-tag", auth=AUTH)
    expect(boxd.InvalidArgument, boxd.images.pull, "no-registry-named")
    boxd.images.remove(ref)

    # Sandbox.create(pull="missing") fetches the image first.
    with boxd.Sandbox.create(image=ref, pull="missing", auth=AUTH, memory="128m", ttl="5m") as sb:
        assert sb.exec(["true"]).exit_code == 0
    boxd.images.remove(ref, force=True)

    async def aio() -> None:
        ref2 = f"{HOST}/sdk/python-aio:v1"
        d2 = await boxd.aio.images.push(ref2, source=IMAGE, auth=AUTH)
        assert d2 == digest, (d2, digest)
        im = await boxd.aio.images.pull(ref2, auth=AUTH)
        assert im.digest == digest
        try:
            await boxd.aio.images.pull(f"{HOST}/sdk/python-aio:missing", auth=AUTH)
            raise AssertionError("pull of a missing tag did not fail")
        except boxd.NotFound:
            pass
        await boxd.aio.images.remove(ref2)
        await boxd.aio.default_client().close()

    asyncio.run(aio())
    print("OK")


if __name__ == "__main__":
    main()
