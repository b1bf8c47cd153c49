from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateSecretRequest(_message.Message):
    __slots__ = ["allow_http", "format", "header", "hosts", "name", "upstream_ca", "value"]
    ALLOW_HTTP_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_CA_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    allow_http: bool
    format: str
    header: str
    hosts: _containers.RepeatedScalarFieldContainer[str]
    name: str
    upstream_ca: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., hosts: _Optional[_Iterable[str]] = ..., header: _Optional[str] = ..., format: _Optional[str] = ..., allow_http: bool = ..., upstream_ca: _Optional[str] = ...) -> None: ...

class CreateSecretResponse(_message.Message):
    __slots__ = ["secret"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    secret: SecretInfo
    def __init__(self, secret: _Optional[_Union[SecretInfo, _Mapping]] = ...) -> None: ...

class ListSecretsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSecretsResponse(_message.Message):
    __slots__ = ["secrets"]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    secrets: _containers.RepeatedCompositeFieldContainer[SecretInfo]
    def __init__(self, secrets: _Optional[_Iterable[_Union[SecretInfo, _Mapping]]] = ...) -> None: ...

class RemoveSecretRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RemoveSecretResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RotateSecretRequest(_message.Message):
    __slots__ = ["name", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class RotateSecretResponse(_message.Message):
    __slots__ = ["secret"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    secret: SecretInfo
    def __init__(self, secret: _Optional[_Union[SecretInfo, _Mapping]] = ...) -> None: ...

class SandboxSecret(_message.Message):
    __slots__ = ["env", "hosts", "name"]
    ENV_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    env: str
    hosts: _containers.RepeatedScalarFieldContainer[str]
    name: str
    def __init__(self, name: _Optional[str] = ..., env: _Optional[str] = ..., hosts: _Optional[_Iterable[str]] = ...) -> None: ...

class SecretInfo(_message.Message):
    __slots__ = ["allow_http", "created_at", "format", "header", "hosts", "name", "owner_uid", "updated_at"]
    ALLOW_HTTP_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_UID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    allow_http: bool
    created_at: str
    format: str
    header: str
    hosts: _containers.RepeatedScalarFieldContainer[str]
    name: str
    owner_uid: int
    updated_at: str
    def __init__(self, name: _Optional[str] = ..., owner_uid: _Optional[int] = ..., hosts: _Optional[_Iterable[str]] = ..., header: _Optional[str] = ..., format: _Optional[str] = ..., allow_http: bool = ..., created_at: _Optional[str] = ..., updated_at: _Optional[str] = ...) -> None: ...
