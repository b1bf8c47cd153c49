from boxd.v1 import files_pb2 as _files_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
DIFF_CHANGE_ADDED: DiffChange
DIFF_CHANGE_DELETED: DiffChange
DIFF_CHANGE_MODIFIED: DiffChange
DIFF_CHANGE_UNSPECIFIED: DiffChange

class DiffEntry(_message.Message):
    __slots__ = ["binary", "change", "gid", "link_target", "mode", "patch", "patch_truncated", "path", "raw_path", "size", "type", "uid"]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    LINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    PATCH_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RAW_PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    binary: bool
    change: DiffChange
    gid: int
    link_target: str
    mode: int
    patch: str
    patch_truncated: bool
    path: str
    raw_path: bytes
    size: int
    type: _files_pb2.FileType
    uid: int
    def __init__(self, path: _Optional[str] = ..., raw_path: _Optional[bytes] = ..., change: _Optional[_Union[DiffChange, str]] = ..., type: _Optional[_Union[_files_pb2.FileType, str]] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., link_target: _Optional[str] = ..., patch: _Optional[str] = ..., binary: bool = ..., patch_truncated: bool = ...) -> None: ...

class DiffSandboxRequest(_message.Message):
    __slots__ = ["patch", "sandbox_id", "since"]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    patch: bool
    sandbox_id: str
    since: str
    def __init__(self, sandbox_id: _Optional[str] = ..., since: _Optional[str] = ..., patch: bool = ...) -> None: ...

class DiffSandboxResponse(_message.Message):
    __slots__ = ["done", "entries", "patch_truncated", "truncated"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    PATCH_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    done: bool
    entries: _containers.RepeatedCompositeFieldContainer[DiffEntry]
    patch_truncated: bool
    truncated: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[DiffEntry, _Mapping]]] = ..., done: bool = ..., truncated: bool = ..., patch_truncated: bool = ...) -> None: ...

class DiffChange(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
