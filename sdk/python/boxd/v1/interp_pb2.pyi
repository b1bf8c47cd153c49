from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CodeContext(_message.Message):
    __slots__ = ["execution_count", "language", "name"]
    EXECUTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    execution_count: int
    language: str
    name: str
    def __init__(self, name: _Optional[str] = ..., language: _Optional[str] = ..., execution_count: _Optional[int] = ...) -> None: ...

class CodeError(_message.Message):
    __slots__ = ["name", "traceback", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    traceback: _containers.RepeatedScalarFieldContainer[str]
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., traceback: _Optional[_Iterable[str]] = ...) -> None: ...

class CodeOutput(_message.Message):
    __slots__ = ["data"]
    class DataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.ScalarMap[str, bytes]
    def __init__(self, data: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class CodeResult(_message.Message):
    __slots__ = ["context", "displays", "duration_ms", "error", "execution_count", "interrupted", "restarted", "timed_out", "truncated", "value"]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DISPLAYS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_COUNT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    RESTARTED_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    context: str
    displays: _containers.RepeatedCompositeFieldContainer[CodeOutput]
    duration_ms: int
    error: CodeError
    execution_count: int
    interrupted: bool
    restarted: bool
    timed_out: bool
    truncated: bool
    value: CodeOutput
    def __init__(self, value: _Optional[_Union[CodeOutput, _Mapping]] = ..., displays: _Optional[_Iterable[_Union[CodeOutput, _Mapping]]] = ..., error: _Optional[_Union[CodeError, _Mapping]] = ..., truncated: bool = ..., timed_out: bool = ..., interrupted: bool = ..., restarted: bool = ..., execution_count: _Optional[int] = ..., context: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class DeleteCodeContextRequest(_message.Message):
    __slots__ = ["context", "sandbox_id"]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    context: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., context: _Optional[str] = ...) -> None: ...

class DeleteCodeContextResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListCodeContextsRequest(_message.Message):
    __slots__ = ["sandbox_id"]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class ListCodeContextsResponse(_message.Message):
    __slots__ = ["contexts"]
    CONTEXTS_FIELD_NUMBER: _ClassVar[int]
    contexts: _containers.RepeatedCompositeFieldContainer[CodeContext]
    def __init__(self, contexts: _Optional[_Iterable[_Union[CodeContext, _Mapping]]] = ...) -> None: ...

class RestartCodeContextRequest(_message.Message):
    __slots__ = ["context", "sandbox_id"]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    context: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., context: _Optional[str] = ...) -> None: ...

class RestartCodeContextResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RunCodeRequest(_message.Message):
    __slots__ = ["code", "context", "language", "output_limit", "sandbox_id", "timeout"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    code: str
    context: str
    language: str
    output_limit: int
    sandbox_id: str
    timeout: str
    def __init__(self, sandbox_id: _Optional[str] = ..., code: _Optional[str] = ..., language: _Optional[str] = ..., context: _Optional[str] = ..., timeout: _Optional[str] = ..., output_limit: _Optional[int] = ...) -> None: ...

class RunCodeResponse(_message.Message):
    __slots__ = ["result", "stderr", "stdout"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    result: CodeResult
    stderr: bytes
    stdout: bytes
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., result: _Optional[_Union[CodeResult, _Mapping]] = ...) -> None: ...
