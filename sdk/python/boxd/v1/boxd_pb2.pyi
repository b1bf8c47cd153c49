from boxd.v1 import volumes_pb2 as _volumes_pb2
from boxd.v1 import usage_pb2 as _usage_pb2
from boxd.v1 import network_pb2 as _network_pb2
from boxd.v1 import diff_pb2 as _diff_pb2
from boxd.v1 import checkpoint_pb2 as _checkpoint_pb2
from boxd.v1 import secrets_pb2 as _secrets_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
IMAGE_FORMAT_ROOTFS: ImageFormat
IMAGE_FORMAT_TAR: ImageFormat
IMAGE_FORMAT_UNSPECIFIED: ImageFormat

class BindMount(_message.Message):
    __slots__ = ["noexec", "path", "read_only", "source"]
    NOEXEC_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    noexec: bool
    path: str
    read_only: bool
    source: str
    def __init__(self, source: _Optional[str] = ..., path: _Optional[str] = ..., read_only: bool = ..., noexec: bool = ...) -> None: ...

class BuildImageRequest(_message.Message):
    __slots__ = ["build_args", "context", "dockerfile", "force", "no_cache", "ref"]
    class BuildArgsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BUILD_ARGS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DOCKERFILE_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    NO_CACHE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    build_args: _containers.ScalarMap[str, str]
    context: bytes
    dockerfile: bytes
    force: bool
    no_cache: bool
    ref: str
    def __init__(self, ref: _Optional[str] = ..., dockerfile: _Optional[bytes] = ..., build_args: _Optional[_Mapping[str, str]] = ..., force: bool = ..., no_cache: bool = ..., context: _Optional[bytes] = ...) -> None: ...

class BuildImageResponse(_message.Message):
    __slots__ = ["image", "steps"]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    image: Image
    steps: _containers.RepeatedCompositeFieldContainer[BuildStep]
    def __init__(self, image: _Optional[_Union[Image, _Mapping]] = ..., steps: _Optional[_Iterable[_Union[BuildStep, _Mapping]]] = ...) -> None: ...

class BuildStep(_message.Message):
    __slots__ = ["cached", "duration_ms", "instruction", "line"]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    cached: bool
    duration_ms: int
    instruction: str
    line: int
    def __init__(self, line: _Optional[int] = ..., instruction: _Optional[str] = ..., cached: bool = ..., duration_ms: _Optional[int] = ...) -> None: ...

class CommitSandboxRequest(_message.Message):
    __slots__ = ["force", "message", "ref", "sandbox_id"]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    force: bool
    message: str
    ref: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., ref: _Optional[str] = ..., message: _Optional[str] = ..., force: bool = ...) -> None: ...

class CommitSandboxResponse(_message.Message):
    __slots__ = ["image"]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image: Image
    def __init__(self, image: _Optional[_Union[Image, _Mapping]] = ...) -> None: ...

class CopyInRequest(_message.Message):
    __slots__ = ["data", "path", "sandbox_id"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    path: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class CopyInResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CopyOutRequest(_message.Message):
    __slots__ = ["path", "sandbox_id"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class CopyOutResponse(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class CreateSandboxRequest(_message.Message):
    __slots__ = ["auto_resume", "binds", "cold", "cpu_weight", "env", "exec_timeout", "git", "git_depth", "hostname", "idle_timeout", "image", "labels", "limits", "memory_low", "name", "network", "on_idle", "output_limit", "publish", "pull", "read_only_rootfs", "registry_auth", "replace", "runtime", "secrets", "tmpfs", "ttl", "ulimits", "user", "volumes", "workdir"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AUTO_RESUME_FIELD_NUMBER: _ClassVar[int]
    BINDS_FIELD_NUMBER: _ClassVar[int]
    COLD_FIELD_NUMBER: _ClassVar[int]
    CPU_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    EXEC_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    GIT_DEPTH_FIELD_NUMBER: _ClassVar[int]
    GIT_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LOW_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ON_IDLE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_FIELD_NUMBER: _ClassVar[int]
    PULL_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_ROOTFS_FIELD_NUMBER: _ClassVar[int]
    REGISTRY_AUTH_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    TMPFS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    ULIMITS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    auto_resume: bool
    binds: _containers.RepeatedScalarFieldContainer[str]
    cold: bool
    cpu_weight: int
    env: _containers.RepeatedScalarFieldContainer[str]
    exec_timeout: str
    git: str
    git_depth: int
    hostname: str
    idle_timeout: str
    image: str
    labels: _containers.ScalarMap[str, str]
    limits: Limits
    memory_low: str
    name: str
    network: NetworkRequest
    on_idle: str
    output_limit: int
    publish: _containers.RepeatedCompositeFieldContainer[PublishedPort]
    pull: str
    read_only_rootfs: bool
    registry_auth: RegistryAuth
    replace: bool
    runtime: str
    secrets: _containers.RepeatedScalarFieldContainer[str]
    tmpfs: _containers.RepeatedScalarFieldContainer[str]
    ttl: str
    ulimits: _containers.RepeatedScalarFieldContainer[str]
    user: str
    volumes: _containers.RepeatedScalarFieldContainer[str]
    workdir: str
    def __init__(self, image: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., env: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., name: _Optional[str] = ..., ttl: _Optional[str] = ..., publish: _Optional[_Iterable[_Union[PublishedPort, _Mapping]]] = ..., network: _Optional[_Union[NetworkRequest, _Mapping]] = ..., idle_timeout: _Optional[str] = ..., on_idle: _Optional[str] = ..., pull: _Optional[str] = ..., registry_auth: _Optional[_Union[RegistryAuth, _Mapping]] = ..., user: _Optional[str] = ..., read_only_rootfs: bool = ..., tmpfs: _Optional[_Iterable[str]] = ..., ulimits: _Optional[_Iterable[str]] = ..., hostname: _Optional[str] = ..., cpu_weight: _Optional[int] = ..., memory_low: _Optional[str] = ..., exec_timeout: _Optional[str] = ..., output_limit: _Optional[int] = ..., replace: bool = ..., cold: bool = ..., runtime: _Optional[str] = ..., volumes: _Optional[_Iterable[str]] = ..., binds: _Optional[_Iterable[str]] = ..., secrets: _Optional[_Iterable[str]] = ..., auto_resume: bool = ..., git: _Optional[str] = ..., git_depth: _Optional[int] = ...) -> None: ...

class CreateSandboxResponse(_message.Message):
    __slots__ = ["sandbox"]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class DeleteSandboxRequest(_message.Message):
    __slots__ = ["background", "force", "id", "timeout"]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    background: bool
    force: bool
    id: str
    timeout: str
    def __init__(self, id: _Optional[str] = ..., timeout: _Optional[str] = ..., force: bool = ..., background: bool = ...) -> None: ...

class DeleteSandboxResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ["args", "combined_output", "env", "output_limit", "resume", "sandbox_id", "stdin", "timeout", "user", "workdir"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    COMBINED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    combined_output: bool
    env: _containers.RepeatedScalarFieldContainer[str]
    output_limit: int
    resume: bool
    sandbox_id: str
    stdin: bytes
    timeout: str
    user: str
    workdir: str
    def __init__(self, sandbox_id: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ..., timeout: _Optional[str] = ..., stdin: _Optional[bytes] = ..., output_limit: _Optional[int] = ..., user: _Optional[str] = ..., combined_output: bool = ..., resume: bool = ...) -> None: ...

class ExecResponse(_message.Message):
    __slots__ = ["result", "stderr", "stdout", "usage"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    result: ExecResult
    stderr: bytes
    stdout: bytes
    usage: _usage_pb2.ResourceUsage
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., result: _Optional[_Union[ExecResult, _Mapping]] = ..., usage: _Optional[_Union[_usage_pb2.ResourceUsage, _Mapping]] = ...) -> None: ...

class ExecResult(_message.Message):
    __slots__ = ["ended_at", "exit_code", "max_rss_bytes", "oom_killed", "output", "pid", "process_usec", "signal", "started_at", "system_cpu_usec", "timed_out", "truncated", "user_cpu_usec"]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    PROCESS_USEC_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    USER_CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    ended_at: str
    exit_code: int
    max_rss_bytes: int
    oom_killed: bool
    output: bytes
    pid: int
    process_usec: int
    signal: str
    started_at: str
    system_cpu_usec: int
    timed_out: bool
    truncated: bool
    user_cpu_usec: int
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[str] = ..., timed_out: bool = ..., truncated: bool = ..., started_at: _Optional[str] = ..., ended_at: _Optional[str] = ..., user_cpu_usec: _Optional[int] = ..., system_cpu_usec: _Optional[int] = ..., max_rss_bytes: _Optional[int] = ..., pid: _Optional[int] = ..., oom_killed: bool = ..., output: _Optional[bytes] = ..., process_usec: _Optional[int] = ...) -> None: ...

class ExecStreamResponse(_message.Message):
    __slots__ = ["result", "stderr", "stdout", "usage"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    result: ExecResult
    stderr: bytes
    stdout: bytes
    usage: _usage_pb2.ResourceUsage
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., result: _Optional[_Union[ExecResult, _Mapping]] = ..., usage: _Optional[_Union[_usage_pb2.ResourceUsage, _Mapping]] = ...) -> None: ...

class ForkSandboxRequest(_message.Message):
    __slots__ = ["clone_volumes", "count", "env", "labels", "limits", "names", "sandbox_id", "share_volumes", "ttl", "with_processes", "workdir"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLONE_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SHARE_VOLUMES_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WITH_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    clone_volumes: bool
    count: int
    env: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.ScalarMap[str, str]
    limits: Limits
    names: _containers.RepeatedScalarFieldContainer[str]
    sandbox_id: str
    share_volumes: bool
    ttl: str
    with_processes: bool
    workdir: str
    def __init__(self, sandbox_id: _Optional[str] = ..., count: _Optional[int] = ..., names: _Optional[_Iterable[str]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., env: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., ttl: _Optional[str] = ..., clone_volumes: bool = ..., share_volumes: bool = ..., with_processes: bool = ...) -> None: ...

class ForkSandboxResponse(_message.Message):
    __slots__ = ["sandboxes"]
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    sandboxes: _containers.RepeatedCompositeFieldContainer[Sandbox]
    def __init__(self, sandboxes: _Optional[_Iterable[_Union[Sandbox, _Mapping]]] = ...) -> None: ...

class GetSandboxRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetSandboxResponse(_message.Message):
    __slots__ = ["sandbox"]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class Image(_message.Message):
    __slots__ = ["created_at", "digest", "labels", "name", "size"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    created_at: str
    digest: str
    labels: _containers.ScalarMap[str, str]
    name: str
    size: int
    def __init__(self, name: _Optional[str] = ..., digest: _Optional[str] = ..., size: _Optional[int] = ..., created_at: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ImportImageRequest(_message.Message):
    __slots__ = ["data", "force", "format", "name"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    force: bool
    format: ImageFormat
    name: str
    def __init__(self, name: _Optional[str] = ..., format: _Optional[_Union[ImageFormat, str]] = ..., data: _Optional[bytes] = ..., force: bool = ...) -> None: ...

class ImportImageResponse(_message.Message):
    __slots__ = ["images"]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[Image]
    def __init__(self, images: _Optional[_Iterable[_Union[Image, _Mapping]]] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ["cpus", "disk", "memory", "pids"]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    DISK_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    cpus: float
    disk: str
    memory: str
    pids: int
    def __init__(self, memory: _Optional[str] = ..., cpus: _Optional[float] = ..., pids: _Optional[int] = ..., disk: _Optional[str] = ...) -> None: ...

class ListImagesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListImagesResponse(_message.Message):
    __slots__ = ["images"]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[Image]
    def __init__(self, images: _Optional[_Iterable[_Union[Image, _Mapping]]] = ...) -> None: ...

class ListSandboxesRequest(_message.Message):
    __slots__ = ["all", "labels", "owner"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ALL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    all: bool
    labels: _containers.ScalarMap[str, str]
    owner: str
    def __init__(self, labels: _Optional[_Mapping[str, str]] = ..., all: bool = ..., owner: _Optional[str] = ...) -> None: ...

class ListSandboxesResponse(_message.Message):
    __slots__ = ["sandboxes"]
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    sandboxes: _containers.RepeatedCompositeFieldContainer[Sandbox]
    def __init__(self, sandboxes: _Optional[_Iterable[_Union[Sandbox, _Mapping]]] = ...) -> None: ...

class NetworkRequest(_message.Message):
    __slots__ = ["allow", "mode"]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    allow: _containers.RepeatedScalarFieldContainer[str]
    mode: str
    def __init__(self, mode: _Optional[str] = ..., allow: _Optional[_Iterable[str]] = ...) -> None: ...

class NetworkStatus(_message.Message):
    __slots__ = ["address", "address6", "allow", "dns", "gateway", "mode"]
    ADDRESS6_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    DNS_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    address: str
    address6: str
    allow: _containers.RepeatedScalarFieldContainer[str]
    dns: str
    gateway: str
    mode: str
    def __init__(self, mode: _Optional[str] = ..., allow: _Optional[_Iterable[str]] = ..., address: _Optional[str] = ..., gateway: _Optional[str] = ..., dns: _Optional[str] = ..., address6: _Optional[str] = ...) -> None: ...

class PauseSandboxRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class PauseSandboxResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PublishPortRequest(_message.Message):
    __slots__ = ["port", "sandbox_id"]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    port: PublishedPort
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., port: _Optional[_Union[PublishedPort, _Mapping]] = ...) -> None: ...

class PublishPortResponse(_message.Message):
    __slots__ = ["port"]
    PORT_FIELD_NUMBER: _ClassVar[int]
    port: PublishedPort
    def __init__(self, port: _Optional[_Union[PublishedPort, _Mapping]] = ...) -> None: ...

class PublishedPort(_message.Message):
    __slots__ = ["error", "host_ip", "host_port", "port", "protocol", "state"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    HOST_PORT_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    error: str
    host_ip: str
    host_port: int
    port: int
    protocol: str
    state: str
    def __init__(self, host_ip: _Optional[str] = ..., host_port: _Optional[int] = ..., port: _Optional[int] = ..., protocol: _Optional[str] = ..., state: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class RegistryAuth(_message.Message):
    __slots__ = ["identity_token", "password", "username"]
    IDENTITY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    identity_token: str
    password: str
    username: str
    def __init__(self, username: _Optional[str] = ..., password: _Optional[str] = ..., identity_token: _Optional[str] = ...) -> None: ...

class RemoveImageRequest(_message.Message):
    __slots__ = ["force", "name"]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    force: bool
    name: str
    def __init__(self, name: _Optional[str] = ..., force: bool = ...) -> None: ...

class RemoveImageResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Sandbox(_message.Message):
    __slots__ = ["auto_resume", "binds", "checkpoint_bytes", "checkpoint_pause", "checkpointed_at", "cpu_weight", "cpus", "created_at", "disk_bytes", "disk_used_bytes", "env", "exec_timeout", "expires_at", "hostname", "id", "idle_timeout", "image", "init_pid", "init_restarts", "labels", "last_activity_at", "last_restart_at", "last_restart_reason", "memory_bytes", "memory_low_bytes", "name", "network", "on_idle", "output_limit", "owner", "owner_uid", "pause_reason", "paused_at", "pids", "ports", "restart_refused", "runtime", "runtime_advisories", "runtime_version", "secrets", "security", "state", "stopped_at", "tmpfs", "ulimits", "usage", "user", "volumes", "workdir"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AUTO_RESUME_FIELD_NUMBER: _ClassVar[int]
    BINDS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTED_AT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_BYTES_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_PAUSE_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    CPU_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    EXEC_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    INIT_PID_FIELD_NUMBER: _ClassVar[int]
    INIT_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RESTART_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RESTART_REASON_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LOW_BYTES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ON_IDLE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    PAUSED_AT_FIELD_NUMBER: _ClassVar[int]
    PAUSE_REASON_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    RESTART_REFUSED_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_ADVISORIES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    SECURITY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STOPPED_AT_FIELD_NUMBER: _ClassVar[int]
    TMPFS_FIELD_NUMBER: _ClassVar[int]
    ULIMITS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    auto_resume: bool
    binds: _containers.RepeatedCompositeFieldContainer[BindMount]
    checkpoint_bytes: int
    checkpoint_pause: str
    checkpointed_at: str
    cpu_weight: int
    cpus: float
    created_at: str
    disk_bytes: int
    disk_used_bytes: int
    env: _containers.RepeatedScalarFieldContainer[str]
    exec_timeout: str
    expires_at: str
    hostname: str
    id: str
    idle_timeout: str
    image: str
    init_pid: int
    init_restarts: int
    labels: _containers.ScalarMap[str, str]
    last_activity_at: str
    last_restart_at: str
    last_restart_reason: str
    memory_bytes: int
    memory_low_bytes: int
    name: str
    network: NetworkStatus
    on_idle: str
    output_limit: int
    owner: str
    owner_uid: int
    pause_reason: str
    paused_at: str
    pids: int
    ports: _containers.RepeatedCompositeFieldContainer[PublishedPort]
    restart_refused: str
    runtime: str
    runtime_advisories: _containers.RepeatedScalarFieldContainer[str]
    runtime_version: str
    secrets: _containers.RepeatedCompositeFieldContainer[_secrets_pb2.SandboxSecret]
    security: Security
    state: str
    stopped_at: str
    tmpfs: _containers.RepeatedCompositeFieldContainer[TmpfsMount]
    ulimits: Ulimits
    usage: Usage
    user: str
    volumes: _containers.RepeatedCompositeFieldContainer[_volumes_pb2.VolumeMount]
    workdir: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., image: _Optional[str] = ..., state: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., cpus: _Optional[float] = ..., pids: _Optional[int] = ..., env: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[str] = ..., expires_at: _Optional[str] = ..., security: _Optional[_Union[Security, _Mapping]] = ..., init_pid: _Optional[int] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., init_restarts: _Optional[int] = ..., last_restart_at: _Optional[str] = ..., last_restart_reason: _Optional[str] = ..., restart_refused: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[PublishedPort, _Mapping]]] = ..., network: _Optional[_Union[NetworkStatus, _Mapping]] = ..., runtime: _Optional[str] = ..., runtime_version: _Optional[str] = ..., runtime_advisories: _Optional[_Iterable[str]] = ..., owner_uid: _Optional[int] = ..., owner: _Optional[str] = ..., idle_timeout: _Optional[str] = ..., on_idle: _Optional[str] = ..., last_activity_at: _Optional[str] = ..., paused_at: _Optional[str] = ..., pause_reason: _Optional[str] = ..., user: _Optional[str] = ..., tmpfs: _Optional[_Iterable[_Union[TmpfsMount, _Mapping]]] = ..., ulimits: _Optional[_Union[Ulimits, _Mapping]] = ..., hostname: _Optional[str] = ..., cpu_weight: _Optional[int] = ..., memory_low_bytes: _Optional[int] = ..., exec_timeout: _Optional[str] = ..., output_limit: _Optional[int] = ..., stopped_at: _Optional[str] = ..., disk_bytes: _Optional[int] = ..., disk_used_bytes: _Optional[int] = ..., volumes: _Optional[_Iterable[_Union[_volumes_pb2.VolumeMount, _Mapping]]] = ..., binds: _Optional[_Iterable[_Union[BindMount, _Mapping]]] = ..., checkpoint_bytes: _Optional[int] = ..., checkpointed_at: _Optional[str] = ..., checkpoint_pause: _Optional[str] = ..., secrets: _Optional[_Iterable[_Union[_secrets_pb2.SandboxSecret, _Mapping]]] = ..., auto_resume: bool = ...) -> None: ...

class SandboxStats(_message.Message):
    __slots__ = ["cpu_percent", "id", "memory_limit_bytes", "name", "state", "usage"]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    cpu_percent: float
    id: str
    memory_limit_bytes: int
    name: str
    state: str
    usage: Usage
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[str] = ..., memory_limit_bytes: _Optional[int] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., cpu_percent: _Optional[float] = ...) -> None: ...

class Security(_message.Message):
    __slots__ = ["capabilities", "network", "read_only_rootfs", "seccomp", "uid_map"]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_ROOTFS_FIELD_NUMBER: _ClassVar[int]
    SECCOMP_FIELD_NUMBER: _ClassVar[int]
    UID_MAP_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    network: bool
    read_only_rootfs: bool
    seccomp: str
    uid_map: str
    def __init__(self, network: bool = ..., read_only_rootfs: bool = ..., capabilities: _Optional[_Iterable[str]] = ..., seccomp: _Optional[str] = ..., uid_map: _Optional[str] = ...) -> None: ...

class StartSandboxRequest(_message.Message):
    __slots__ = ["sandbox_id"]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ...) -> None: ...

class StartSandboxResponse(_message.Message):
    __slots__ = ["sandbox"]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class StatPathRequest(_message.Message):
    __slots__ = ["path", "sandbox_id"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class StatPathResponse(_message.Message):
    __slots__ = ["is_dir", "link_target", "mode", "mtime", "name", "size"]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    LINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MTIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    is_dir: bool
    link_target: str
    mode: int
    mtime: str
    name: str
    size: int
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., is_dir: bool = ..., mtime: _Optional[str] = ..., link_target: _Optional[str] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ["ids", "interval", "stream"]
    IDS_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    interval: str
    stream: bool
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., stream: bool = ..., interval: _Optional[str] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ["at", "sandboxes"]
    AT_FIELD_NUMBER: _ClassVar[int]
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    at: str
    sandboxes: _containers.RepeatedCompositeFieldContainer[SandboxStats]
    def __init__(self, at: _Optional[str] = ..., sandboxes: _Optional[_Iterable[_Union[SandboxStats, _Mapping]]] = ...) -> None: ...

class StopSandboxRequest(_message.Message):
    __slots__ = ["sandbox_id", "timeout"]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    timeout: str
    def __init__(self, sandbox_id: _Optional[str] = ..., timeout: _Optional[str] = ...) -> None: ...

class StopSandboxResponse(_message.Message):
    __slots__ = ["sandbox"]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class TagImageRequest(_message.Message):
    __slots__ = ["force", "source", "target"]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    force: bool
    source: str
    target: str
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ..., force: bool = ...) -> None: ...

class TagImageResponse(_message.Message):
    __slots__ = ["image"]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    image: Image
    def __init__(self, image: _Optional[_Union[Image, _Mapping]] = ...) -> None: ...

class TmpfsMount(_message.Message):
    __slots__ = ["path", "size_bytes"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    path: str
    size_bytes: int
    def __init__(self, path: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class Ulimits(_message.Message):
    __slots__ = ["cpu_seconds", "fsize_bytes", "nofile", "nproc"]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FSIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NOFILE_FIELD_NUMBER: _ClassVar[int]
    NPROC_FIELD_NUMBER: _ClassVar[int]
    cpu_seconds: int
    fsize_bytes: int
    nofile: int
    nproc: int
    def __init__(self, nofile: _Optional[int] = ..., nproc: _Optional[int] = ..., cpu_seconds: _Optional[int] = ..., fsize_bytes: _Optional[int] = ...) -> None: ...

class UnpauseSandboxRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class UnpauseSandboxResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class UnpublishPortRequest(_message.Message):
    __slots__ = ["host_port", "port", "sandbox_id"]
    HOST_PORT_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    host_port: int
    port: int
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., port: _Optional[int] = ..., host_port: _Optional[int] = ...) -> None: ...

class UnpublishPortResponse(_message.Message):
    __slots__ = ["ports"]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ports: _containers.RepeatedCompositeFieldContainer[PublishedPort]
    def __init__(self, ports: _Optional[_Iterable[_Union[PublishedPort, _Mapping]]] = ...) -> None: ...

class UpdateNetworkRequest(_message.Message):
    __slots__ = ["allow", "deny", "sandbox_id"]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    DENY_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    allow: _containers.RepeatedScalarFieldContainer[str]
    deny: _containers.RepeatedScalarFieldContainer[str]
    sandbox_id: str
    def __init__(self, sandbox_id: _Optional[str] = ..., allow: _Optional[_Iterable[str]] = ..., deny: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateNetworkResponse(_message.Message):
    __slots__ = ["network"]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    network: NetworkStatus
    def __init__(self, network: _Optional[_Union[NetworkStatus, _Mapping]] = ...) -> None: ...

class UpdateSandboxRequest(_message.Message):
    __slots__ = ["env", "extend", "limits", "sandbox_id", "ttl", "workdir"]
    ENV_FIELD_NUMBER: _ClassVar[int]
    EXTEND_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    env: _containers.RepeatedScalarFieldContainer[str]
    extend: str
    limits: Limits
    sandbox_id: str
    ttl: str
    workdir: str
    def __init__(self, sandbox_id: _Optional[str] = ..., ttl: _Optional[str] = ..., extend: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., env: _Optional[_Iterable[str]] = ..., workdir: _Optional[str] = ...) -> None: ...

class UpdateSandboxResponse(_message.Message):
    __slots__ = ["sandbox"]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: Sandbox
    def __init__(self, sandbox: _Optional[_Union[Sandbox, _Mapping]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["block_read_bytes", "block_write_bytes", "cpu_usec", "memory_bytes", "memory_limit_bytes", "memory_peak_bytes", "net_rx_bytes", "net_tx_bytes", "network", "oom_kills", "pids"]
    BLOCK_READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    BLOCK_WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    NET_RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    NET_TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLS_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    block_read_bytes: int
    block_write_bytes: int
    cpu_usec: int
    memory_bytes: int
    memory_limit_bytes: int
    memory_peak_bytes: int
    net_rx_bytes: int
    net_tx_bytes: int
    network: bool
    oom_kills: int
    pids: int
    def __init__(self, memory_bytes: _Optional[int] = ..., memory_peak_bytes: _Optional[int] = ..., cpu_usec: _Optional[int] = ..., pids: _Optional[int] = ..., oom_kills: _Optional[int] = ..., memory_limit_bytes: _Optional[int] = ..., block_read_bytes: _Optional[int] = ..., block_write_bytes: _Optional[int] = ..., network: bool = ..., net_rx_bytes: _Optional[int] = ..., net_tx_bytes: _Optional[int] = ...) -> None: ...

class ImageFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
