"""boxd: run untrusted code in sandboxes from Python.

    import boxd
    with boxd.Sandbox.create(memory="256m", ttl="1h") as sb:
        r = sb.exec(["sh", "-c", "echo $((6*7))"], timeout=5)
        print(r.exit_code, r.stdout_text)

The SDK talks gRPC to boxd's Unix socket ($BOXD_SOCKET, else
/run/boxd/boxd.sock); see sdk/python/README.md.
"""

from ._client import Client, default_client, default_socket
from .errors import (
    AlreadyExists,
    BoxdError,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
    Unknown,
)
from .files import Files, SearchResult, UploadResult, Watch
from .process import PIPE, Execution, Processes, Session, Sessions
from .sandbox import OutputStream, Sandbox, events, list
from .code import CodeError, CodeOutput, CodeResult
from . import images
from .types import (
    BlobProgress,
    BuildResult,
    BuildStep,
    Change,
    Changes,
    DownloadedFile,
    Event,
    EditResult,
    ExecResult,
    FileInfo,
    FileResult,
    GrepMatch,
    Image,
    Line,
    Lines,
    NetworkStatus,
    Output,
    PathStat,
    Pool,
    ProcessInfo,
    PublishedPort,
    SandboxInfo,
    SandboxStats,
    SessionInfo,
    SessionResult,
    TransferProgress,
    Usage,
    WatchEvent,
)

__version__ = "0.1.0"

__all__ = [
    "Client", "default_client", "default_socket", "CodeResult", "CodeOutput", "CodeError",
    "Sandbox", "list", "events", "Event", "SandboxStats", "PIPE", "Execution", "Files", "Processes", "Session", "Sessions", "UploadResult", "Watch", "WatchEvent",
    "SearchResult", "Line", "Lines", "EditResult", "GrepMatch",
    "ExecResult", "Output", "SandboxInfo", "Usage", "FileInfo", "FileResult", "DownloadedFile",
    "ProcessInfo", "SessionInfo", "SessionResult", "OutputStream", "images", "Image", "BuildResult", "BuildStep",
    "PublishedPort", "NetworkStatus", "Pool", "BlobProgress", "TransferProgress", "PathStat", "Change", "Changes",
    "BoxdError", "NotFound", "InvalidArgument", "AlreadyExists", "FailedPrecondition", "ResourceExhausted",
    "DeadlineExceeded", "Unavailable", "PermissionDenied", "Unauthenticated", "Cancelled", "Unimplemented", "Internal", "Unknown",
]
