"""Typed exceptions for boxd's API codes.

boxd maps every internal error to one API code (rpc.ToConnect on the daemon
side); each code is one exception class here, so callers catch what they
mean (``except boxd.NotFound``) instead of parsing messages.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Type

import grpc

__all__ = [
    "BoxdError",
    "NotFound",
    "InvalidArgument",
    "AlreadyExists",
    "FailedPrecondition",
    "ResourceExhausted",
    "DeadlineExceeded",
    "Unavailable",
    "PermissionDenied",
    "Cancelled",
    "Unimplemented",
    "Internal",
    "Unknown",
]


class BoxdError(Exception):
    """Base class of every error the SDK raises for a failed call.

    ``code`` is the API code (``"not_found"``, ``"invalid_argument"``, ...)
    and ``message`` boxd's message, which names what was wrong.
    """

    code: str = "unknown"

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class NotFound(BoxdError):
    code = "not_found"


class InvalidArgument(BoxdError):
    """A request field was bad. ``field`` names it when boxd's message does
    (boxd writes ``limits.memory: "12xb" is not a size``), else it is None."""

    code = "invalid_argument"

    def __init__(self, message: str, code: Optional[str] = None, field: Optional[str] = None) -> None:
        super().__init__(message, code)
        self.field = field if field is not None else _field_of(message)


class AlreadyExists(BoxdError):
    code = "already_exists"


class FailedPrecondition(BoxdError):
    code = "failed_precondition"


class ResourceExhausted(BoxdError):
    code = "resource_exhausted"


class DeadlineExceeded(BoxdError, TimeoutError):
    """The call's request_timeout passed; the call was cancelled, and boxd
    stopped its work (a foreground command's process tree is killed)."""

    code = "deadline_exceeded"


class Unavailable(BoxdError, ConnectionError):
    """boxd could not be reached (no daemon on the socket, or it went away)."""

    code = "unavailable"


class PermissionDenied(BoxdError, PermissionError):
    code = "permission_denied"


class Unauthenticated(PermissionDenied):
    """A TCP listener of boxd's refused the call's token (or certificate):
    missing, unknown, expired or revoked. Also a PermissionDenied."""

    code = "unauthenticated"


class Cancelled(BoxdError):
    code = "canceled"


class Unimplemented(BoxdError):
    code = "unimplemented"


class Internal(BoxdError):
    code = "internal"


class Unknown(BoxdError):
    code = "unknown"


_BY_STATUS: Dict[grpc.StatusCode, Type[BoxdError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.DATA_LOSS: Internal,
}

# The API codes by name, as boxd writes them in per-file results
# (FileError.code) and in Connect's JSON errors.
BY_CODE: Dict[str, Type[BoxdError]] = {
    "not_found": NotFound,
    "invalid_argument": InvalidArgument,
    "already_exists": AlreadyExists,
    "failed_precondition": FailedPrecondition,
    "resource_exhausted": ResourceExhausted,
    "deadline_exceeded": DeadlineExceeded,
    "unavailable": Unavailable,
    "permission_denied": PermissionDenied,
    "canceled": Cancelled,
    "unimplemented": Unimplemented,
    "internal": Internal,
}

# A leading "field.path: " in an invalid_argument message.
_FIELD = re.compile(r"^([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*|\[\d+\])*): ")


def _field_of(message: str) -> Optional[str]:
    m = _FIELD.match(message)
    return m.group(1) if m else None


def from_code(code: str, message: str) -> BoxdError:
    """The exception for an API code given by name (e.g. a FileError)."""
    cls = BY_CODE.get(code, Unknown)
    return cls(message, code=code or None)


# Connect's code names (the HTTP/1.1 file reads, boxd/_http1.py) -> the
# same classes as the gRPC status codes above.
_BY_CONNECT: Dict[str, Type[BoxdError]] = {
    "not_found": NotFound,
    "invalid_argument": InvalidArgument,
    "out_of_range": InvalidArgument,
    "already_exists": AlreadyExists,
    "failed_precondition": FailedPrecondition,
    "aborted": FailedPrecondition,
    "resource_exhausted": ResourceExhausted,
    "deadline_exceeded": DeadlineExceeded,
    "unavailable": Unavailable,
    "permission_denied": PermissionDenied,
    "unauthenticated": Unauthenticated,
    "canceled": Cancelled,
    "unimplemented": Unimplemented,
    "internal": Internal,
    "data_loss": Internal,
}


def from_connect(code: str, message: str, socket: str = "") -> BoxdError:
    """The exception for an error in the Connect protocol (its code name and
    message), mapped exactly as from_rpc_error maps the gRPC status."""
    cls = _BY_CONNECT.get(code, Unknown)
    details = message or code
    if cls is Unavailable and socket:
        details = f"boxd is not reachable on {socket}: {details}"
    return cls(details)


def from_rpc_error(err: grpc.RpcError, socket: str = "") -> BoxdError:
    """Turns a gRPC error into the matching typed exception."""
    status = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else None) or str(status)
    cls = _BY_STATUS.get(status, Unknown)
    if cls is Unavailable and socket:
        details = f"boxd is not reachable on {socket}: {details}"
    if cls is DeadlineExceeded and details == "Deadline Exceeded":
        details = "the call's request_timeout passed (boxd cancelled its work)"
    return cls(details)
