from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListPoolsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListPoolsResponse(_message.Message):
    __slots__ = ["pools"]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedCompositeFieldContainer[Pool]
    def __init__(self, pools: _Optional[_Iterable[_Union[Pool, _Mapping]]] = ...) -> None: ...

class Pool(_message.Message):
    __slots__ = ["cold_empty", "cold_unfit", "handed_out", "image", "network", "ready", "runtime", "size", "starting"]
    COLD_EMPTY_FIELD_NUMBER: _ClassVar[int]
    COLD_UNFIT_FIELD_NUMBER: _ClassVar[int]
    HANDED_OUT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STARTING_FIELD_NUMBER: _ClassVar[int]
    cold_empty: int
    cold_unfit: int
    handed_out: int
    image: str
    network: str
    ready: int
    runtime: str
    size: int
    starting: int
    def __init__(self, image: _Optional[str] = ..., size: _Optional[int] = ..., ready: _Optional[int] = ..., starting: _Optional[int] = ..., runtime: _Optional[str] = ..., network: _Optional[str] = ..., handed_out: _Optional[int] = ..., cold_empty: _Optional[int] = ..., cold_unfit: _Optional[int] = ...) -> None: ...

class SetPoolSizeRequest(_message.Message):
    __slots__ = ["image", "runtime", "size"]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    image: str
    runtime: str
    size: int
    def __init__(self, image: _Optional[str] = ..., size: _Optional[int] = ..., runtime: _Optional[str] = ...) -> None: ...

class SetPoolSizeResponse(_message.Message):
    __slots__ = ["pool"]
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: Pool
    def __init__(self, pool: _Optional[_Union[Pool, _Mapping]] = ...) -> None: ...
