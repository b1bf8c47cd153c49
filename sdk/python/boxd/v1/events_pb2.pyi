from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Event(_message.Message):
    __slots__ = ["attrs", "owner_uid", "sandbox", "seq", "time", "type"]
    class AttrsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTRS_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    attrs: _containers.ScalarMap[str, str]
    owner_uid: int
    sandbox: str
    seq: int
    time: str
    type: str
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[str] = ..., type: _Optional[str] = ..., sandbox: _Optional[str] = ..., attrs: _Optional[_Mapping[str, str]] = ..., owner_uid: _Optional[int] = ...) -> None: ...

class EventsRequest(_message.Message):
    __slots__ = ["filters", "follow", "since"]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedScalarFieldContainer[str]
    follow: bool
    since: str
    def __init__(self, since: _Optional[str] = ..., filters: _Optional[_Iterable[str]] = ..., follow: bool = ...) -> None: ...

class EventsResponse(_message.Message):
    __slots__ = ["event", "live"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    event: Event
    live: bool
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ..., live: bool = ...) -> None: ...
