from boxd.v1 import boxd_pb2 as _boxd_pb2
from boxd.v1 import usage_pb2 as _usage_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AttachRequest(_message.Message):
    __slots__ = ["no_follow", "process_id", "sandbox_id", "stdin"]
    NO_FOLLOW_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    no_follow: bool
    process_id: str
    sandbox_id: str
    stdin: bool
    def __init__(self, sandbox_id: _Optional[str] = ..., process_id: _Optional[str] = ..., stdin: bool = ..., no_follow: bool = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["env", "name", "sandbox_id", "shell", "user", "workdir"]
    ENV_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    env: _containers.RepeatedScalarFieldContainer[str]
    name: str
    sandbox_id: str
    shell: str
    user: str
    workdir: str
    def __init__(self, sandbox_id: _Optional[str] = ..., name: _Optional[str] = ..., shell: _Optional[str] = ..., user: _Optional[str] = ..., env: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["name", "sandbox_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListProcessesRequest(_message.Message):
    __slots__ = ["sandbox_id"]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class ListProcessesResponse(_message.Message):
    __slots__ = ["processes"]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["sandbox_id"]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["sessions"]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ...) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ["args", "id", "pid", "result", "started_at", "state", "stdin_open", "tty", "user"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STDIN_OPEN_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    id: str
    pid: int
    result: _boxd_pb2.ExecResult
    started_at: str
    state: str
    stdin_open: bool
    tty: bool
    user: str
    def __init__(self, id: _Optional[str] = ..., pid: _Optional[int] = ..., args: _Optional[_Iterable[str]] = ..., user: _Optional[str] = ..., tty: bool = ..., stdin_open: bool = ..., state: _Optional[str] = ..., started_at: _Optional[str] = ..., result: _Optional[_Union[_boxd_pb2.ExecResult, _Mapping]] = ...) -> None: ...

class ProcessInput(_message.Message):
    __slots__ = ["attach", "close_stdin", "resize", "signal", "start", "stdin"]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    CLOSE_STDIN_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    attach: AttachRequest
    close_stdin: bool
    resize: WindowSize
    signal: str
    start: ProcessSpec
    stdin: bytes
    def __init__(self, start: _Optional[_Union[ProcessSpec, _Mapping]] = ..., attach: _Optional[_Union[AttachRequest, _Mapping]] = ..., stdin: _Optional[bytes] = ..., close_stdin: bool = ..., resize: _Optional[_Union[WindowSize, _Mapping]] = ..., signal: _Optional[str] = ...) -> None: ...

class ProcessOutput(_message.Message):
    __slots__ = ["process", "result", "stderr", "stdout", "usage"]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    process: ProcessInfo
    result: _boxd_pb2.ExecResult
    stderr: bytes
    stdout: bytes
    usage: _usage_pb2.ResourceUsage
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., result: _Optional[_Union[_boxd_pb2.ExecResult, _Mapping]] = ..., process: _Optional[_Union[ProcessInfo, _Mapping]] = ..., usage: _Optional[_Union[_usage_pb2.ResourceUsage, _Mapping]] = ...) -> None: ...

class ProcessSpec(_message.Message):
    __slots__ = ["args", "env", "keep_stdin_open", "output_limit", "sandbox_id", "stdin", "timeout", "tty", "user", "window", "workdir"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    KEEP_STDIN_OPEN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.RepeatedScalarFieldContainer[str]
    keep_stdin_open: bool
    output_limit: int
    sandbox_id: str
    stdin: bytes
    timeout: str
    tty: bool
    user: str
    window: WindowSize
    workdir: str
    def __init__(self, sandbox_id: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ..., user: _Optional[str] = ..., timeout: _Optional[str] = ..., tty: bool = ..., window: _Optional[_Union[WindowSize, _Mapping]] = ..., stdin: _Optional[bytes] = ..., output_limit: _Optional[int] = ..., keep_stdin_open: bool = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["busy", "commands", "created_at", "name", "pid", "restarts", "shell", "user"]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    busy: bool
    commands: int
    created_at: str
    name: str
    pid: int
    restarts: int
    shell: str
    user: str
    def __init__(self, name: _Optional[str] = ..., shell: _Optional[str] = ..., user: _Optional[str] = ..., pid: _Optional[int] = ..., created_at: _Optional[str] = ..., busy: bool = ..., commands: _Optional[int] = ..., restarts: _Optional[int] = ...) -> None: ...

class SessionExecRequest(_message.Message):
    __slots__ = ["command", "name", "output_limit", "sandbox_id", "timeout"]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    command: str
    name: str
    output_limit: int
    sandbox_id: str
    timeout: str
    def __init__(self, sandbox_id: _Optional[str] = ..., name: _Optional[str] = ..., command: _Optional[str] = ..., timeout: _Optional[str] = ..., output_limit: _Optional[int] = ...) -> None: ...

class SessionExecResponse(_message.Message):
    __slots__ = ["result", "stderr", "stdout"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    result: SessionExecResult
    stderr: bytes
    stdout: bytes
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., result: _Optional[_Union[SessionExecResult, _Mapping]] = ...) -> None: ...

class SessionExecResult(_message.Message):
    __slots__ = ["result", "session_ended", "session_restarted"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ENDED_FIELD_NUMBER: _ClassVar[int]
    SESSION_RESTARTED_FIELD_NUMBER: _ClassVar[int]
    result: _boxd_pb2.ExecResult
    session_ended: bool
    session_restarted: bool
    def __init__(self, result: _Optional[_Union[_boxd_pb2.ExecResult, _Mapping]] = ..., session_restarted: bool = ..., session_ended: bool = ...) -> None: ...

class SignalProcessRequest(_message.Message):
    __slots__ = ["all", "process_id", "sandbox_id", "signal"]
    ALL_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    all: bool
    process_id: str
    sandbox_id: str
    signal: str
    def __init__(self, sandbox_id: _Optional[str] = ..., process_id: _Optional[str] = ..., signal: _Optional[str] = ..., all: bool = ...) -> None: ...

class SignalProcessResponse(_message.Message):
    __slots__ = ["process"]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    process: ProcessInfo
    def __init__(self, process: _Optional[_Union[ProcessInfo, _Mapping]] = ...) -> None: ...

class StartProcessRequest(_message.Message):
    __slots__ = ["spec"]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: ProcessSpec
    def __init__(self, spec: _Optional[_Union[ProcessSpec, _Mapping]] = ...) -> None: ...

class StartProcessResponse(_message.Message):
    __slots__ = ["process"]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    process: ProcessInfo
    def __init__(self, process: _Optional[_Union[ProcessInfo, _Mapping]] = ...) -> None: ...

class WaitProcessRequest(_message.Message):
    __slots__ = ["process_id", "sandbox_id"]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    process_id: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., process_id: _Optional[str] = ...) -> None: ...

class WaitProcessResponse(_message.Message):
    __slots__ = ["process", "usage"]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    process: ProcessInfo
    usage: _usage_pb2.ResourceUsage
    def __init__(self, process: _Optional[_Union[ProcessInfo, _Mapping]] = ..., usage: _Optional[_Union[_usage_pb2.ResourceUsage, _Mapping]] = ...) -> None: ...

class WindowSize(_message.Message):
    __slots__ = ["cols", "rows"]
    COLS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    cols: int
    rows: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...
