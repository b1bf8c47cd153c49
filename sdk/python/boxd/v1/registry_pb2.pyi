from boxd.v1 import boxd_pb2 as _boxd_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BlobProgress(_message.Message):
    __slots__ = ["digest", "done", "kind", "size", "status"]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    digest: str
    done: int
    kind: str
    size: int
    status: str
    def __init__(self, digest: _Optional[str] = ..., kind: _Optional[str] = ..., size: _Optional[int] = ..., done: _Optional[int] = ..., status: _Optional[str] = ...) -> None: ...

class PullImageRequest(_message.Message):
    __slots__ = ["auth", "force", "platform", "reference"]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    auth: _boxd_pb2.RegistryAuth
    force: bool
    platform: str
    reference: str
    def __init__(self, reference: _Optional[str] = ..., platform: _Optional[str] = ..., auth: _Optional[_Union[_boxd_pb2.RegistryAuth, _Mapping]] = ..., force: bool = ...) -> None: ...

class PullImageResponse(_message.Message):
    __slots__ = ["image", "progress"]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    image: _boxd_pb2.Image
    progress: TransferProgress
    def __init__(self, progress: _Optional[_Union[TransferProgress, _Mapping]] = ..., image: _Optional[_Union[_boxd_pb2.Image, _Mapping]] = ...) -> None: ...

class PushImageRequest(_message.Message):
    __slots__ = ["auth", "reference", "source"]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    auth: _boxd_pb2.RegistryAuth
    reference: str
    source: str
    def __init__(self, reference: _Optional[str] = ..., source: _Optional[str] = ..., auth: _Optional[_Union[_boxd_pb2.RegistryAuth, _Mapping]] = ...) -> None: ...

class PushImageResponse(_message.Message):
    __slots__ = ["digest", "progress"]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    digest: str
    progress: TransferProgress
    def __init__(self, progress: _Optional[_Union[TransferProgress, _Mapping]] = ..., digest: _Optional[str] = ...) -> None: ...

class TransferProgress(_message.Message):
    __slots__ = ["blobs", "phase"]
    BLOBS_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    blobs: _containers.RepeatedCompositeFieldContainer[BlobProgress]
    phase: str
    def __init__(self, phase: _Optional[str] = ..., blobs: _Optional[_Iterable[_Union[BlobProgress, _Mapping]]] = ...) -> None: ...
