"""The connection to boxd: one gRPC channel on the Unix socket, or over
TLS to a TCP listener of boxd's (boxd --listen) when a host is given.

boxd serves gRPC (besides Connect and gRPC-Web) from one handler, over
HTTP/2 without TLS on its socket. grpcio's C core does the HTTP/2, flow
control, deadlines (sent as grpc-timeout, so boxd cancels the work when a
call's time is up) and bidirectional streams; protobuf's compiled runtime
does the encoding. The method tables are read from the generated
descriptors, so no grpc stub generator is needed.
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from typing import Any, Callable, Dict, Iterator, Optional, TypeVar

import grpc
import grpc.experimental  # ChannelOptions; not imported by "import grpc"

from . import _http1, _wire, errors
from .v1 import boxd_pb2, events_pb2, files_pb2, interp_pb2, pool_pb2, process_pb2, registry_pb2

DEFAULT_SOCKET = "/run/boxd/boxd.sock"

# The environment variables boxctl reads for a TCP listener of boxd's: its
# https://HOST:PORT, the bearer token, a private CA, a client certificate.
HOST_ENV, TOKEN_ENV = "BOXD_HOST", "BOXD_TOKEN"
TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV = "BOXD_TLS_CA", "BOXD_TLS_CERT", "BOXD_TLS_KEY"
_MAX_TOKEN = 128  # boxd reads no longer token

# boxd refuses messages above 8 MiB (rpc.MaxMessageBytes); file data goes in
# 1 MiB pieces, the size boxd itself sends.
CHUNK = 1 << 20
_MAX_MESSAGE = 16 << 20

T = TypeVar("T")


def default_socket() -> str:
    """``$BOXD_SOCKET``, else /run/boxd/boxd.sock (as boxctl)."""
    return os.environ.get("BOXD_SOCKET") or DEFAULT_SOCKET


class Remote:
    """Where a client with a host calls: the gRPC target and the channel
    credentials (TLS, and the token as call credentials, sent on every
    call). The token itself is not kept, so no repr or error can show it."""

    __slots__ = ("host", "target", "credentials")

    def __init__(self, host: str, target: str, credentials: grpc.ChannelCredentials) -> None:
        self.host, self.target, self.credentials = host, target, credentials


def remote(host: Optional[str], token: Optional[str], tls_ca: Optional[str], tls_cert: Optional[str],
           tls_key: Optional[str]) -> Optional[Remote]:
    """The TCP listener to call, from the arguments, else the BOXD_HOST,
    BOXD_TOKEN, BOXD_TLS_CA, BOXD_TLS_CERT and BOXD_TLS_KEY environment
    variables; None without a host (the Unix socket is used). Bad settings
    raise InvalidArgument naming the setting, before any call."""
    host = host or os.environ.get(HOST_ENV) or ""
    if not host:
        return None
    token = token or os.environ.get(TOKEN_ENV) or ""
    tls_ca = tls_ca or os.environ.get(TLS_CA_ENV) or None
    tls_cert = tls_cert or os.environ.get(TLS_CERT_ENV) or None
    tls_key = tls_key or os.environ.get(TLS_KEY_ENV) or None
    try:
        u = urllib.parse.urlsplit(host)
        port = u.port or 443
    except ValueError:
        u, port = None, 0
    if u is None or u.scheme != "https" or not u.hostname or u.path not in ("", "/") or u.query or u.fragment \
            or u.username is not None:
        raise errors.InvalidArgument(f"host: {host!r} is not https://HOST:PORT")
    if bool(tls_cert) != bool(tls_key):
        raise errors.InvalidArgument("tls_cert, tls_key: a client certificate needs both (or neither)")
    if not token and not tls_cert:
        raise errors.InvalidArgument(f"host: no token (token= or ${TOKEN_ENV}) and no client certificate "
                                     f"(tls_cert=, tls_key=) for {host}")
    if token and (len(token) > _MAX_TOKEN or not token.isascii() or not token.isprintable() or " " in token):
        # Never quote the token: it may be a secret pasted in the wrong place.
        raise errors.InvalidArgument(f"token: not a boxd token (printable ASCII without spaces, at most "
                                     f"{_MAX_TOKEN} characters)")
    creds = grpc.ssl_channel_credentials(root_certificates=_pem(tls_ca, "tls_ca", b"CERTIFICATE"),
                                         private_key=_pem(tls_key, "tls_key", b"PRIVATE KEY"),
                                         certificate_chain=_pem(tls_cert, "tls_cert", b"CERTIFICATE"))
    if token:
        creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
    name = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    return Remote(f"https://{name}:{port}", f"{name}:{port}", creds)


def _pem(path: Optional[str], setting: str, kind: bytes) -> Optional[bytes]:
    """The PEM file of a TLS setting, checked to hold a block of kind (a
    wrong file fails here, not as an opaque handshake error later)."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise errors.InvalidArgument(f"{setting}: {path}: {e.strerror}") from None
    if b"-----BEGIN " not in data or kind not in data:
        raise errors.InvalidArgument(f"{setting}: {path} holds no PEM {kind.decode()}")
    return data


class _Service:
    """The methods of one protobuf service as grpc multi-callables, built
    from the service's descriptor."""

    def __init__(self, channel: grpc.Channel, service: Any, module: Any) -> None:
        for m in service.methods:
            req = _message_class(m.input_type)
            resp = _message_class(m.output_type)
            path = f"/{service.full_name}/{m.name}"
            kind = _kind(m)
            factory = getattr(channel, kind)
            setattr(self, m.name, factory(path, request_serializer=_serialize, response_deserializer=resp.FromString))
        # File data: the data field is read as a view of the received buffer
        # (see _wire); the methods' other fields parse as usual.
        for name, field in _DATA_FIELDS.get(service.full_name, {}).items():
            m = service.methods_by_name[name]
            factory = getattr(channel, _kind(m))
            split = _wire.splitter(_message_class(m.output_type), field)
            setattr(self, name + "Split", factory(f"/{service.full_name}/{name}", request_serializer=_serialize,
                                                  response_deserializer=split))


# Methods whose responses carry file data, and the data field's number.
_DATA_FIELDS = {"boxd.v1.FileService": {"ReadFile": 2, "DownloadFiles": 2}}


def _serialize(m: Any) -> bytes:
    # Pre-encoded messages (file data, see _wire.data_message) pass as is.
    if isinstance(m, bytes):
        return m
    return m.SerializeToString()


def _kind(m: Any) -> str:
    cs, ss = getattr(m, "client_streaming", None), getattr(m, "server_streaming", None)
    if cs is None or ss is None:  # older runtimes: read the descriptor proto
        from google.protobuf import descriptor_pb2

        p = descriptor_pb2.MethodDescriptorProto()
        m.CopyToProto(p)
        cs, ss = p.client_streaming, p.server_streaming
    return {(False, False): "unary_unary", (False, True): "unary_stream",
            (True, False): "stream_unary", (True, True): "stream_stream"}[(bool(cs), bool(ss))]


def _message_class(desc: Any) -> Any:
    from google.protobuf import symbol_database

    return symbol_database.Default().GetSymbol(desc.full_name)


class Client:
    """A connection to one boxd. Thread-safe; share one per process.

    ``socket``: the daemon's Unix socket (default ``$BOXD_SOCKET``, else
    /run/boxd/boxd.sock). ``timeout``: the default request_timeout, in
    seconds, of every call that does not give its own (None: no limit).

    ``host``: a TCP listener of boxd's (boxd --listen), ``https://HOST:PORT``
    (default ``$BOXD_HOST``); every call then goes there over TLS and none
    to the socket. ``token`` (``$BOXD_TOKEN``) is sent on every call;
    ``tls_ca`` (``$BOXD_TLS_CA``) is a PEM file of a private CA trusted
    instead of the system's; ``tls_cert`` and ``tls_key`` (``$BOXD_TLS_CERT``,
    ``$BOXD_TLS_KEY``) a client certificate for a boxd with --client-ca.
    """

    def __init__(self, socket: Optional[str] = None, *, timeout: Optional[float] = None, host: Optional[str] = None,
                 token: Optional[str] = None, tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None) -> None:
        r = remote(host, token, tls_ca, tls_cert, tls_key)
        self.host = r.host if r else None
        self.socket = None if r else (socket or default_socket())
        # Where the calls go, as errors name it.
        self.where = r.host if r else self.socket
        self.timeout = timeout
        options = [
            ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ("grpc.max_send_message_length", _MAX_MESSAGE),
            # A restarted boxd is found again quickly.
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            # Big file transfers: let the window grow past the default.
            ("grpc.http2.lookahead_bytes", 8 << 20),
            # Server-streaming calls (file reads, ExecStream, watches)
            # poll their own completion queue in the calling thread
            # instead of waiting for grpc's channel thread to hand each
            # message over: on a busy machine every such hand-over waits
            # for the scheduler, and a 100 MiB read is 100 of them
            # (reads under two CPU burners: 104 -> 260-370 MiB/s).
            (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
        ]
        if r:
            self._channel = grpc.secure_channel(r.target, r.credentials, options=options)
        else:
            options.append(("grpc.default_authority", "localhost"))
            self._channel = grpc.insecure_channel("unix:" + os.path.abspath(self.socket), options=options)
        self.sandbox = _Service(self._channel, boxd_pb2.DESCRIPTOR.services_by_name["SandboxService"], boxd_pb2)
        self.files = _Service(self._channel, files_pb2.DESCRIPTOR.services_by_name["FileService"], files_pb2)
        self.process = _Service(self._channel, process_pb2.DESCRIPTOR.services_by_name["ProcessService"], process_pb2)
        self.events = _Service(self._channel, events_pb2.DESCRIPTOR.services_by_name["EventService"], events_pb2)
        self.registry = _Service(self._channel, registry_pb2.DESCRIPTOR.services_by_name["RegistryService"],
                                 registry_pb2)
        self.pool = _Service(self._channel, pool_pb2.DESCRIPTOR.services_by_name["PoolService"], pool_pb2)
        self.code = _Service(self._channel, interp_pb2.DESCRIPTOR.services_by_name["CodeService"], interp_pb2)
        # File reads (ReadFile, DownloadFiles) go over HTTP/1.1 instead, in
        # the Connect protocol: see _http1 for why. Not with a host: they
        # go over the gRPC channel (TLS, token) as every other call.
        self.http1 = _http1.Pool(self.socket) if self.socket else None

    def __repr__(self) -> str:
        return f"boxd.Client({self.where!r})"

    # -- calling helpers -------------------------------------------------

    def _timeout(self, request_timeout: Optional[float]) -> Optional[float]:
        return self.timeout if request_timeout is None else request_timeout

    def unary(self, method: Callable[..., T], request: Any, request_timeout: Optional[float] = None) -> T:
        """Calls a unary or client-streaming method, mapping errors."""
        try:
            return method(request, timeout=self._timeout(request_timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self.where) from None

    def stream(self, method: Callable[..., Any], request: Any, request_timeout: Optional[float] = None) -> "Stream":
        """Calls a server- or bidi-streaming method; the result iterates the
        responses with errors mapped, and cancels the call when closed."""
        try:
            call = method(request, timeout=self._timeout(request_timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self.where) from None
        return Stream(call, self.where)

    def read_stream(self, method: str, request: Any, split: Callable[[Any], T],
                    request_timeout: Optional[float] = None) -> Iterator[T]:
        """Calls a server-streaming method ("/boxd.v1.FileService/ReadFile")
        over HTTP/1.1 (see _http1): each response is split(view of the
        message), the view valid until the next one. Leaving the loop early
        (or closing the iterator) cancels the call. With a host, over the
        gRPC channel: the method's Split callable splits the same way."""
        if self.http1 is None:
            split_method = getattr(self.files, method.rsplit("/", 1)[1] + "Split")  # FileService's
            with self.stream(split_method, request, request_timeout) as s:
                yield from s
            return
        for mv in self.http1.server_stream(method, request.SerializeToString(), self._timeout(request_timeout)):
            yield split(mv)

    def close(self) -> None:
        if self.http1 is not None:
            self.http1.close()
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Stream:
    """Responses of a streaming call. Iterating maps errors to typed
    exceptions; close() (or leaving a with block) cancels the call."""

    def __init__(self, call: Any, socket: str) -> None:
        self._call = call
        self._socket = socket

    def __iter__(self) -> Iterator[Any]:
        try:
            for msg in self._call:
                yield msg
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, self._socket) from None

    def close(self) -> None:
        self._call.cancel()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The process-wide client on default_socket(), made on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default
