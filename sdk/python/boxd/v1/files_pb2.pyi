from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FILE_TYPE_BLOCK_DEVICE: FileType
FILE_TYPE_CHAR_DEVICE: FileType
FILE_TYPE_DIRECTORY: FileType
FILE_TYPE_FIFO: FileType
FILE_TYPE_REGULAR: FileType
FILE_TYPE_SOCKET: FileType
FILE_TYPE_SYMLINK: FileType
FILE_TYPE_UNSPECIFIED: FileType
WATCH_OP_CHMOD: WatchOp
WATCH_OP_CREATE: WatchOp
WATCH_OP_OVERFLOW: WatchOp
WATCH_OP_REMOVE: WatchOp
WATCH_OP_RENAME: WatchOp
WATCH_OP_UNSPECIFIED: WatchOp
WATCH_OP_WRITE: WatchOp

class ChmodPathRequest(_message.Message):
    __slots__ = ["mode", "path", "sandbox_id", "user"]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    mode: int
    path: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., mode: _Optional[int] = ...) -> None: ...

class ChmodPathResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ChownPathRequest(_message.Message):
    __slots__ = ["owner", "path", "recursive", "sandbox_id", "user"]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    owner: str
    path: str
    recursive: bool
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., owner: _Optional[str] = ..., recursive: bool = ...) -> None: ...

class ChownPathResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DownloadFilesRequest(_message.Message):
    __slots__ = ["no_follow", "paths", "sandbox_id", "user"]
    NO_FOLLOW_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    no_follow: bool
    paths: _containers.RepeatedScalarFieldContainer[str]
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ..., user: _Optional[str] = ..., no_follow: bool = ...) -> None: ...

class DownloadFilesResponse(_message.Message):
    __slots__ = ["data", "done", "index", "start"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    done: FileResult
    index: int
    start: FileInfo
    def __init__(self, start: _Optional[_Union[FileInfo, _Mapping]] = ..., data: _Optional[bytes] = ..., done: _Optional[_Union[FileResult, _Mapping]] = ..., index: _Optional[int] = ...) -> None: ...

class EditFileRequest(_message.Message):
    __slots__ = ["new_string", "old_string", "path", "replace_all", "sandbox_id", "user"]
    NEW_STRING_FIELD_NUMBER: _ClassVar[int]
    OLD_STRING_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ALL_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    new_string: str
    old_string: str
    path: str
    replace_all: bool
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., old_string: _Optional[str] = ..., new_string: _Optional[str] = ..., replace_all: bool = ...) -> None: ...

class EditFileResponse(_message.Message):
    __slots__ = ["info", "line", "replacements"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    line: int
    replacements: int
    def __init__(self, replacements: _Optional[int] = ..., line: _Optional[int] = ..., info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class FileError(_message.Message):
    __slots__ = ["code", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ["error", "gid", "link_target", "mode", "mtime", "name", "path", "size", "type", "uid"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    LINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MTIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    error: str
    gid: int
    link_target: str
    mode: int
    mtime: str
    name: str
    path: str
    size: int
    type: FileType
    uid: int
    def __init__(self, path: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[_Union[FileType, str]] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., mtime: _Optional[str] = ..., link_target: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class FileResult(_message.Message):
    __slots__ = ["error", "index", "path", "size"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    error: FileError
    index: int
    path: str
    size: int
    def __init__(self, index: _Optional[int] = ..., path: _Optional[str] = ..., size: _Optional[int] = ..., error: _Optional[_Union[FileError, _Mapping]] = ...) -> None: ...

class GlobRequest(_message.Message):
    __slots__ = ["limit", "path", "pattern", "sandbox_id", "user"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    limit: int
    path: str
    pattern: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., pattern: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class GlobResponse(_message.Message):
    __slots__ = ["matches", "truncated", "truncated_reason"]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_REASON_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[FileInfo]
    truncated: bool
    truncated_reason: str
    def __init__(self, matches: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., truncated: bool = ..., truncated_reason: _Optional[str] = ...) -> None: ...

class GrepMatch(_message.Message):
    __slots__ = ["binary", "line", "path"]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    binary: bool
    line: Line
    path: str
    def __init__(self, path: _Optional[str] = ..., line: _Optional[_Union[Line, _Mapping]] = ..., binary: bool = ...) -> None: ...

class GrepRequest(_message.Message):
    __slots__ = ["glob", "ignore_case", "limit", "literal", "max_line_bytes", "path", "pattern", "sandbox_id", "user"]
    GLOB_FIELD_NUMBER: _ClassVar[int]
    IGNORE_CASE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LITERAL_FIELD_NUMBER: _ClassVar[int]
    MAX_LINE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    glob: str
    ignore_case: bool
    limit: int
    literal: bool
    max_line_bytes: int
    path: str
    pattern: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., pattern: _Optional[str] = ..., path: _Optional[str] = ..., glob: _Optional[str] = ..., user: _Optional[str] = ..., limit: _Optional[int] = ..., ignore_case: bool = ..., literal: bool = ..., max_line_bytes: _Optional[int] = ...) -> None: ...

class GrepResponse(_message.Message):
    __slots__ = ["matches", "truncated", "truncated_reason"]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_REASON_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[GrepMatch]
    truncated: bool
    truncated_reason: str
    def __init__(self, matches: _Optional[_Iterable[_Union[GrepMatch, _Mapping]]] = ..., truncated: bool = ..., truncated_reason: _Optional[str] = ...) -> None: ...

class Line(_message.Message):
    __slots__ = ["cut", "number", "text"]
    CUT_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    cut: bool
    number: int
    text: str
    def __init__(self, number: _Optional[int] = ..., text: _Optional[str] = ..., cut: bool = ...) -> None: ...

class ListDirRequest(_message.Message):
    __slots__ = ["depth", "path", "sandbox_id", "user"]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    depth: int
    path: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., depth: _Optional[int] = ...) -> None: ...

class ListDirResponse(_message.Message):
    __slots__ = ["entries"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileInfo]
    def __init__(self, entries: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ...) -> None: ...

class MakeDirRequest(_message.Message):
    __slots__ = ["mode", "parents", "path", "sandbox_id", "user"]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    mode: int
    parents: bool
    path: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., mode: _Optional[int] = ..., parents: bool = ...) -> None: ...

class MakeDirResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ["length", "no_follow", "offset", "path", "sandbox_id", "user"]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    NO_FOLLOW_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    length: int
    no_follow: bool
    offset: int
    path: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ..., no_follow: bool = ...) -> None: ...

class ReadFileResponse(_message.Message):
    __slots__ = ["data", "info"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class ReadLinesRequest(_message.Message):
    __slots__ = ["limit", "max_line_bytes", "offset", "path", "sandbox_id", "user"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_LINE_BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    limit: int
    max_line_bytes: int
    offset: int
    path: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ..., max_line_bytes: _Optional[int] = ...) -> None: ...

class ReadLinesResponse(_message.Message):
    __slots__ = ["binary", "info", "lines", "more_lines", "next_offset"]
    BINARY_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    MORE_LINES_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    binary: bool
    info: FileInfo
    lines: _containers.RepeatedCompositeFieldContainer[Line]
    more_lines: bool
    next_offset: int
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ..., lines: _Optional[_Iterable[_Union[Line, _Mapping]]] = ..., more_lines: bool = ..., next_offset: _Optional[int] = ..., binary: bool = ...) -> None: ...

class RemovePathRequest(_message.Message):
    __slots__ = ["path", "recursive", "sandbox_id", "user"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., recursive: bool = ...) -> None: ...

class RemovePathResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RenamePathRequest(_message.Message):
    __slots__ = ["dst", "no_overwrite", "sandbox_id", "src", "user"]
    DST_FIELD_NUMBER: _ClassVar[int]
    NO_OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    dst: str
    no_overwrite: bool
    sandbox_id: str
    src: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., src: _Optional[str] = ..., dst: _Optional[str] = ..., user: _Optional[str] = ..., no_overwrite: bool = ...) -> None: ...

class RenamePathResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StatFileRequest(_message.Message):
    __slots__ = ["follow", "path", "sandbox_id", "user"]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    follow: bool
    path: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., follow: bool = ...) -> None: ...

class StatFileResponse(_message.Message):
    __slots__ = ["info"]
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class UploadFile(_message.Message):
    __slots__ = ["mode", "path"]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    mode: int
    path: str
    def __init__(self, path: _Optional[str] = ..., mode: _Optional[int] = ...) -> None: ...

class UploadFilesRequest(_message.Message):
    __slots__ = ["data", "file", "parents", "sandbox_id", "user"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    file: UploadFile
    parents: bool
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., user: _Optional[str] = ..., parents: bool = ..., file: _Optional[_Union[UploadFile, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadFilesResponse(_message.Message):
    __slots__ = ["bytes_written", "files_written", "results"]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    FILES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    bytes_written: int
    files_written: int
    results: _containers.RepeatedCompositeFieldContainer[FileResult]
    def __init__(self, results: _Optional[_Iterable[_Union[FileResult, _Mapping]]] = ..., files_written: _Optional[int] = ..., bytes_written: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ["is_dir", "message", "old_path", "op", "path"]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OLD_PATH_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    is_dir: bool
    message: str
    old_path: str
    op: WatchOp
    path: str
    def __init__(self, path: _Optional[str] = ..., op: _Optional[_Union[WatchOp, str]] = ..., old_path: _Optional[str] = ..., is_dir: bool = ..., message: _Optional[str] = ...) -> None: ...

class WatchPathRequest(_message.Message):
    __slots__ = ["path", "recursive", "sandbox_id", "user"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    path: str
    recursive: bool
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., recursive: bool = ...) -> None: ...

class WatchPathResponse(_message.Message):
    __slots__ = ["events", "ready"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[WatchEvent]
    ready: bool
    def __init__(self, ready: bool = ..., events: _Optional[_Iterable[_Union[WatchEvent, _Mapping]]] = ...) -> None: ...

class WriteFileRequest(_message.Message):
    __slots__ = ["append", "data", "exclusive", "in_place", "mode", "parents", "path", "sandbox_id", "user"]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    IN_PLACE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    append: bool
    data: bytes
    exclusive: bool
    in_place: bool
    mode: int
    parents: bool
    path: str
    sandbox_id: str
    user: str
    def __init__(self, sandbox_id: _Optional[str] = ..., path: _Optional[str] = ..., user: _Optional[str] = ..., mode: _Optional[int] = ..., parents: bool = ..., in_place: bool = ..., append: bool = ..., exclusive: bool = ..., data: _Optional[bytes] = ...) -> None: ...

class WriteFileResponse(_message.Message):
    __slots__ = ["bytes_written", "info"]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    bytes_written: int
    info: FileInfo
    def __init__(self, bytes_written: _Optional[int] = ..., info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class FileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class WatchOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
