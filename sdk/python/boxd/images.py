"""Images boxd stores (``boxd.images``): list, import, remove, build from a
Dockerfile, and pull from / push to OCI registries.

    import boxd
    img = boxd.images.import_image(open("rootfs.tar", "rb"), name="work/app:v1", rootfs=True)
    boxd.images.pull("registry.example:5000/team/app:v2", auth={"username": "u", "password": "p"})
    [i.name for i in boxd.images.list()]

Tar data (imports, build contexts) is streamed in 1 MiB messages.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, List, Mapping, Optional

from . import _wire
from ._client import Client, default_client
from .files import Data, _chunks
from .sandbox import _auth
from .types import BuildResult, Image, Pool, TransferProgress
from .v1 import boxd_pb2, pool_pb2, registry_pb2

__all__ = ["list", "import_image", "remove", "build", "pull", "push", "pool_sizes", "set_pool_size"]

OnProgress = Optional[Callable[[TransferProgress], Any]]

_IMPORT_DATA = boxd_pb2.ImportImageRequest.DESCRIPTOR.fields_by_name["data"].number
_BUILD_DATA = boxd_pb2.BuildImageRequest.DESCRIPTOR.fields_by_name["context"].number


def list(*, client: Optional[Client] = None, request_timeout: Optional[float] = None) -> List[Image]:  # noqa: A001
    """Every image boxd stores."""
    c = client or default_client()
    return [Image._from(i) for i in c.unary(c.sandbox.ListImages, boxd_pb2.ListImagesRequest(), request_timeout).images]


def import_requests(data: Data, name: str, rootfs: bool, force: bool) -> Iterator[Any]:
    fmt = boxd_pb2.IMAGE_FORMAT_ROOTFS if rootfs else boxd_pb2.IMAGE_FORMAT_TAR
    yield boxd_pb2.ImportImageRequest(name=name, format=fmt, force=force)
    for ch in _chunks(data):
        yield _wire.data_message(_IMPORT_DATA, ch)


def import_image(data: Data, *, name: str = "", rootfs: bool = False, force: bool = False,
                 client: Optional[Client] = None, request_timeout: Optional[float] = None) -> List[Image]:
    """Imports an OCI-layout or docker-archive tar, or with rootfs=True a
    tar of a root filesystem (then name is required). data: bytes, a binary
    file object or an iterable of bytes. force replaces an image of the
    same name (else AlreadyExists). Returns the images written."""
    c = client or default_client()
    r = c.unary(c.sandbox.ImportImage, import_requests(data, name, rootfs, force), request_timeout)
    return [Image._from(i) for i in r.images]


def remove(name: str, *, force: bool = False, client: Optional[Client] = None,
           request_timeout: Optional[float] = None) -> None:
    """Removes an image; one that sandboxes use only with force (else
    FailedPrecondition naming them)."""
    c = client or default_client()
    c.unary(c.sandbox.RemoveImage, boxd_pb2.RemoveImageRequest(name=name, force=force), request_timeout)


def build_requests(ref: str, dockerfile: str | bytes, context: Data, build_args: Optional[Mapping[str, str]],
                   force: bool, no_cache: bool) -> Iterator[Any]:
    df = dockerfile.encode() if isinstance(dockerfile, str) else bytes(dockerfile)
    yield boxd_pb2.BuildImageRequest(ref=ref, dockerfile=df, build_args=dict(build_args or {}), force=force,
                                     no_cache=no_cache)
    for ch in _chunks(context):
        yield _wire.data_message(_BUILD_DATA, ch)


def build(ref: str, dockerfile: str | bytes, context: Data = b"", *, build_args: Optional[Mapping[str, str]] = None,
          force: bool = False, no_cache: bool = False, client: Optional[Client] = None,
          request_timeout: Optional[float] = None) -> BuildResult:
    """Builds an image named ref from a Dockerfile and a build context (tar
    bytes, a file object or an iterable of bytes; empty: no context). Each
    RUN, COPY and ADD becomes a layer, cached by step and inputs. Errors name
    the Dockerfile line (a failed RUN is FailedPrecondition with its exit
    code and output)."""
    c = client or default_client()
    r = c.unary(c.sandbox.BuildImage, build_requests(ref, dockerfile, context, build_args, force, no_cache),
                request_timeout)
    return BuildResult._from(r)


def pull_request(reference: str, platform: str, auth: Optional[Mapping[str, str]],
                 force: bool) -> registry_pb2.PullImageRequest:
    req = registry_pb2.PullImageRequest(reference=reference, platform=platform, force=force)
    a = _auth(auth)
    if a is not None:
        req.auth.CopyFrom(a)
    return req


def push_request(reference: str, source: str, auth: Optional[Mapping[str, str]]) -> registry_pb2.PushImageRequest:
    req = registry_pb2.PushImageRequest(reference=reference, source=source)
    a = _auth(auth)
    if a is not None:
        req.auth.CopyFrom(a)
    return req


def pull(reference: str, *, platform: str = "", auth: Optional[Mapping[str, str]] = None, force: bool = False,
         on_progress: OnProgress = None, client: Optional[Client] = None,
         request_timeout: Optional[float] = None) -> Image:
    """Pulls HOST[:PORT]/PATH[:TAG][@DIGEST] and stores it under that name.
    auth: {"username", "password"} or {"identity_token"}, for that registry
    only. on_progress gets a TransferProgress at most every 100 ms. force
    replaces a local image of the name with another digest."""
    c = client or default_client()
    with c.stream(c.registry.PullImage, pull_request(reference, platform, auth, force), request_timeout) as st:
        for msg in st:
            if msg.HasField("image"):
                return Image._from(msg.image)
            if on_progress is not None and msg.HasField("progress"):
                on_progress(TransferProgress._from(msg.progress))
    raise ConnectionError(f"boxd ended the pull of {reference} without an image")


def push(reference: str, *, source: str = "", auth: Optional[Mapping[str, str]] = None,
         on_progress: OnProgress = None, client: Optional[Client] = None,
         request_timeout: Optional[float] = None) -> str:
    """Pushes the local image source (default: reference) to reference's
    registry and tags it there; returns the digest pushed."""
    c = client or default_client()
    with c.stream(c.registry.PushImage, push_request(reference, source, auth), request_timeout) as st:
        for msg in st:
            if msg.WhichOneof("msg") == "digest":
                return str(msg.digest)
            if on_progress is not None and msg.HasField("progress"):
                on_progress(TransferProgress._from(msg.progress))
    raise ConnectionError(f"boxd ended the push of {reference} without a digest")


def pool_sizes(*, client: Optional[Client] = None, request_timeout: Optional[float] = None) -> List[Pool]:
    """Every image's warm pool: target, ready and starting members."""
    c = client or default_client()
    return [Pool._from(p) for p in c.unary(c.pool.ListPools, pool_pb2.ListPoolsRequest(), request_timeout).pools]


def set_pool_size(image: str, size: int, *, runtime: str = "", client: Optional[Client] = None,
                  request_timeout: Optional[float] = None) -> Pool:
    """Sets an image's warm-pool target (admins only; 0 empties it; lasts
    until boxd restarts). image "": the daemon's default image. runtime:
    the members' ("runc", the default, or "gvisor"): each image has a pool
    per runtime."""
    c = client or default_client()
    r = c.unary(c.pool.SetPoolSize, pool_pb2.SetPoolSizeRequest(image=image, size=size, runtime=runtime), request_timeout)
    return Pool._from(r.pool)
