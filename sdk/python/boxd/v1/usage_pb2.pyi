from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ResourceUsage(_message.Message):
    __slots__ = ["peak_memory_bytes", "read_bytes", "system_cpu_usec", "user_cpu_usec", "wall_usec", "write_bytes"]
    PEAK_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    USER_CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    WALL_USEC_FIELD_NUMBER: _ClassVar[int]
    WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    peak_memory_bytes: int
    read_bytes: int
    system_cpu_usec: int
    user_cpu_usec: int
    wall_usec: int
    write_bytes: int
    def __init__(self, user_cpu_usec: _Optional[int] = ..., system_cpu_usec: _Optional[int] = ..., peak_memory_bytes: _Optional[int] = ..., read_bytes: _Optional[int] = ..., write_bytes: _Optional[int] = ..., wall_usec: _Optional[int] = ...) -> None: ...
