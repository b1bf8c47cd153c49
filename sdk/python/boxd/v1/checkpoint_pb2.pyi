from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class CheckpointSandboxRequest(_message.Message):
    __slots__ = ["id", "leave_running"]
    ID_FIELD_NUMBER: _ClassVar[int]
    LEAVE_RUNNING_FIELD_NUMBER: _ClassVar[int]
    id: str
    leave_running: bool
    def __init__(self, id: _Optional[str] = ..., leave_running: bool = ...) -> None: ...

class CheckpointSandboxResponse(_message.Message):
    __slots__ = ["bytes", "id", "pause", "state"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    id: str
    pause: str
    state: str
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., bytes: _Optional[int] = ..., pause: _Optional[str] = ...) -> None: ...

class RestoreSandboxRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RestoreSandboxResponse(_message.Message):
    __slots__ = ["id", "state"]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: str
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...
