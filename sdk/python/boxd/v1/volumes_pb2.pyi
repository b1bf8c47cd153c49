from boxd.v1 import files_pb2 as _files_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CopyFromVolumeRequest(_message.Message):
    __slots__ = ["name", "path"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class CopyFromVolumeResponse(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class CopyIntoVolumeRequest(_message.Message):
    __slots__ = ["data", "name", "path"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class CopyIntoVolumeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CreateVolumeRequest(_message.Message):
    __slots__ = ["labels", "name", "shared", "size"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FROM_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    name: str
    shared: bool
    size: str
    def __init__(self, name: _Optional[str] = ..., size: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., shared: bool = ..., **kwargs) -> None: ...

class CreateVolumeResponse(_message.Message):
    __slots__ = ["volume"]
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    volume: Volume
    def __init__(self, volume: _Optional[_Union[Volume, _Mapping]] = ...) -> None: ...

class GetVolumeRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetVolumeResponse(_message.Message):
    __slots__ = ["volume"]
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    volume: Volume
    def __init__(self, volume: _Optional[_Union[Volume, _Mapping]] = ...) -> None: ...

class ListVolumeDirRequest(_message.Message):
    __slots__ = ["name", "path"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class ListVolumeDirResponse(_message.Message):
    __slots__ = ["entries", "truncated"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[_files_pb2.FileInfo]
    truncated: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[_files_pb2.FileInfo, _Mapping]]] = ..., truncated: bool = ...) -> None: ...

class ListVolumesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListVolumesResponse(_message.Message):
    __slots__ = ["volumes"]
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    volumes: _containers.RepeatedCompositeFieldContainer[Volume]
    def __init__(self, volumes: _Optional[_Iterable[_Union[Volume, _Mapping]]] = ...) -> None: ...

class ReadVolumeFileRequest(_message.Message):
    __slots__ = ["name", "path"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class ReadVolumeFileResponse(_message.Message):
    __slots__ = ["data", "info"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    info: _files_pb2.FileInfo
    def __init__(self, info: _Optional[_Union[_files_pb2.FileInfo, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class RemoveVolumeRequest(_message.Message):
    __slots__ = ["force", "name"]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    force: bool
    name: str
    def __init__(self, name: _Optional[str] = ..., force: bool = ...) -> None: ...

class RemoveVolumeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SnapshotVolumeRequest(_message.Message):
    __slots__ = ["name", "snapshot"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    name: str
    snapshot: str
    def __init__(self, name: _Optional[str] = ..., snapshot: _Optional[str] = ...) -> None: ...

class SnapshotVolumeResponse(_message.Message):
    __slots__ = ["volume"]
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    volume: Volume
    def __init__(self, volume: _Optional[_Union[Volume, _Mapping]] = ...) -> None: ...

class StatVolumePathRequest(_message.Message):
    __slots__ = ["name", "path"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class StatVolumePathResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: _files_pb2.FileInfo
    def __init__(self, info: _Optional[_Union[_files_pb2.FileInfo, _Mapping]] = ...) -> None: ...

class Volume(_message.Message):
    __slots__ = ["created_at", "id", "labels", "mounts", "name", "owner_uid", "shared", "size_bytes", "snapshots", "used_bytes"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MOUNTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    created_at: str
    id: str
    labels: _containers.ScalarMap[str, str]
    mounts: _containers.RepeatedCompositeFieldContainer[VolumeMount]
    name: str
    owner_uid: int
    shared: bool
    size_bytes: int
    snapshots: _containers.RepeatedScalarFieldContainer[str]
    used_bytes: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., size_bytes: _Optional[int] = ..., used_bytes: _Optional[int] = ..., owner_uid: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[str] = ..., shared: bool = ..., mounts: _Optional[_Iterable[_Union[VolumeMount, _Mapping]]] = ..., snapshots: _Optional[_Iterable[str]] = ...) -> None: ...

class VolumeMount(_message.Message):
    __slots__ = ["path", "read_only", "sandbox_id", "volume", "volume_id"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    VOLUME_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    read_only: bool
    sandbox_id: str
    volume: str
    volume_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., read_only: bool = ..., volume: _Optional[str] = ..., volume_id: _Optional[str] = ...) -> None: ...
