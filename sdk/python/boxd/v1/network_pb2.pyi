from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EgressDenial(_message.Message):
    __slots__ = ["count", "dest", "first", "last", "port", "proto", "reason"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DEST_FIELD_NUMBER: _ClassVar[int]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROTO_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    count: int
    dest: str
    first: str
    last: str
    port: int
    proto: str
    reason: str
    def __init__(self, first: _Optional[str] = ..., last: _Optional[str] = ..., dest: _Optional[str] = ..., port: _Optional[int] = ..., proto: _Optional[str] = ..., reason: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class NetworkLogRequest(_message.Message):
    __slots__ = ["sandbox_id"]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class NetworkLogResponse(_message.Message):
    __slots__ = ["denials"]
    DENIALS_FIELD_NUMBER: _ClassVar[int]
    denials: _containers.RepeatedCompositeFieldContainer[EgressDenial]
    def __init__(self, denials: _Optional[_Iterable[_Union[EgressDenial, _Mapping]]] = ...) -> None: ...
