package wire

// File operations beyond copy-in/copy-out. Each is one connection:
//
//	file-write:    -> request{args} data* data-end      <- result(FileWriteResult) | error (possibly early)
//	file-read:     -> request{args}                     <- result(FileStat) data* (data-end | error) | error
//	file-stat:     -> request{args}                     <- result(FileStat) | error
//	file-list:     -> request{args}                     <- result([]FileStat)* (ok | error)
//	file-mkdir, file-remove, file-rename, file-chmod:
//	               -> request{args}                     <- ok | error
//	upload:        copy-in with args (UploadArgs); see protocol.go and UploadArgs
//	download:      copy-out with args (DownloadArgs); see protocol.go and DownloadArgs
//	file-watch:    -> request{args}                     <- ok(ready) result([]WatchEvent)* (ok | error)
//
// "data" and "data-end" are the tar and tar-end frame types: they carry any
// byte stream, and reusing them keeps the set of frame types (part of the
// wire format, shared with other features) unchanged.

import (
	"io/fs"
	"time"
)

// Operations of the file API.
const (
	OpFileWrite    = "file-write"
	OpFileRead     = "file-read"
	OpFileStat     = "file-stat"
	OpFileList     = "file-list"
	OpFileMkdir    = "file-mkdir"
	OpFileRemove   = "file-remove"
	OpFileRename   = "file-rename"
	OpFileChmod    = "file-chmod"
	OpFileUpload   = "file-upload"   // retired: uploads are copy-in's (see Retired)
	OpFileDownload = "file-download" // retired: downloads are copy-out's (see Retired)
	OpFileWatch    = "file-watch"
)

const (
	FrameFileData    = FrameTar
	FrameFileDataEnd = FrameTarEnd
)

// FileChunk is the payload of one file data frame, the most a frame may
// carry: large frames amortise the per-frame header and system calls, and
// boxd forwards each as one API message, whose fixed costs dominate for
// small ones. It costs the init one buffer of this size per transfer.
const FileChunk = 1 << 20

// Limits of the file API.
const (
	// MaxPathLen is PATH_MAX less its NUL: the kernel refuses longer paths.
	MaxPathLen = 4095
	// MaxNameLen is NAME_MAX, the longest single path component.
	MaxNameLen = 255
	// MaxUserLen bounds a user spec ("name:group", "uid:gid").
	MaxUserLen = 256
	// MaxBulkFiles bounds the files of one upload or download, so the
	// per-file result list stays a modest single message.
	MaxBulkFiles = 10000
	// MaxListDepth bounds a recursive listing; each level holds a
	// directory open in the init.
	MaxListDepth = 64
	// MaxWatches bounds the directories one recursive watch follows.
	MaxWatches = 8192
)

// Error codes of file operations beyond those in protocol.go. The client
// maps them onto errdefs classes.
const (
	CodeFailedPrecondition = "failed-precondition"
	CodeResourceExhausted  = "resource-exhausted"
)

// File types in FileStat.Type.
const (
	FileTypeRegular = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
	FileTypeFIFO    = "fifo"
	FileTypeSocket  = "socket"
	FileTypeChar    = "char"
	FileTypeBlock   = "block"
)

// FileStat describes one file inside the sandbox.
type FileStat struct {
	// Path is the cleaned absolute path for stat, read and write, and the
	// path relative to the listed directory for list.
	Path       string    `json:"path"`
	Name       string    `json:"name"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	Mode       uint32    `json:"mode"` // permission bits with setuid, setgid and sticky (07777)
	UID        uint32    `json:"uid"`
	GID        uint32    `json:"gid"`
	Mtime      time.Time `json:"mtime"`
	LinkTarget string    `json:"link_target,omitempty"`
	// Error is set by list on a directory whose contents could not be
	// read (e.g. permission denied); the listing goes on without them.
	Error string `json:"error,omitempty"`
}

// Every file operation takes User: empty for the sandbox's root, else
// "name", "uid", "name:group" or "uid:gid", looked up in the sandbox's own
// /etc/passwd and /etc/group. The operation runs with that user's
// filesystem identity and groups, so the kernel's permission checks apply.

// FileWriteArgs are the parameters of file-write.
type FileWriteArgs struct {
	Path string `json:"path"`
	User string `json:"user,omitempty"`
	// Mode of the file; nil means 0644 for a new file and the old mode for
	// a replaced one. It is applied exactly (no umask).
	Mode    *uint32 `json:"mode,omitempty"`
	Parents bool    `json:"parents,omitempty"` // create missing parent directories (0755)
	// InPlace truncates and writes the existing file instead of replacing
	// it atomically; Append (which implies InPlace) appends to it.
	InPlace   bool `json:"in_place,omitempty"`
	Append    bool `json:"append,omitempty"`
	Exclusive bool `json:"exclusive,omitempty"` // fail with already-exists if the file exists
}

// FileWriteResult is what file-write returns.
type FileWriteResult struct {
	Bytes int64    `json:"bytes"`
	Stat  FileStat `json:"stat"`
}

// FileReadArgs are the parameters of file-read.
type FileReadArgs struct {
	Path     string `json:"path"`
	User     string `json:"user,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	Length   int64  `json:"length,omitempty"`    // 0: to the end of the file
	NoFollow bool   `json:"no_follow,omitempty"` // refuse a symlink as the final component
}

// FileStatArgs are the parameters of file-stat.
type FileStatArgs struct {
	Path   string `json:"path"`
	User   string `json:"user,omitempty"`
	Follow bool   `json:"follow,omitempty"` // describe a final symlink's target, not the link
}

// FileListArgs are the parameters of file-list.
type FileListArgs struct {
	Path string `json:"path"`
	User string `json:"user,omitempty"`
	// Depth is how many levels to list: 0 or 1 the directory's entries,
	// 2 also their children, and so on; negative means MaxListDepth.
	Depth int `json:"depth,omitempty"`
}

// FileMkdirArgs are the parameters of file-mkdir.
type FileMkdirArgs struct {
	Path    string  `json:"path"`
	User    string  `json:"user,omitempty"`
	Mode    *uint32 `json:"mode,omitempty"` // nil: 0755; applied exactly to the last directory
	Parents bool    `json:"parents,omitempty"`
}

// FileRemoveArgs are the parameters of file-remove.
type FileRemoveArgs struct {
	Path      string `json:"path"`
	User      string `json:"user,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
}

// FileRenameArgs are the parameters of file-rename.
type FileRenameArgs struct {
	Src         string `json:"src"`
	Dst         string `json:"dst"`
	User        string `json:"user,omitempty"`
	NoOverwrite bool   `json:"no_overwrite,omitempty"`
}

// FileChmodArgs are the parameters of file-chmod.
type FileChmodArgs struct {
	Path string `json:"path"`
	User string `json:"user,omitempty"`
	Mode uint32 `json:"mode"`
}

// UploadArgs make a copy-in a batch of files: the tar that follows the
// request is not a tree placed under Request.Path (which is BatchPath, so
// an init that predates batches refuses the request) but files, each
// written at its own path as User, like file-write (atomically replaced,
// never through a final symlink), each with a FileResult of its own.
//
// The tar is the batch's: every entry a regular file whose name is the
// path as the caller gave it (PAXPath instead when tar cannot carry it)
// and whose mode is the file's (BatchModeNone for none; PAXMode instead
// when it does not fit). A file's data may come in pieces: an entry with
// PAXAppend continues the file before it. The data's size is known only
// piece by piece, as the API's messages bring it.
type UploadArgs struct {
	User    string `json:"user,omitempty"`
	Parents bool   `json:"parents,omitempty"`
}

// BatchPath is a batch's Request.Path. An init that reads copy-in's or
// copy-out's path only (it ignores Args) refuses it, naming it in its
// error, rather than taking the batch for a tree.
const BatchPath = "\x00a batch of files needs a newer boxd-init: restart the sandbox"

// PAX records of a batch's tar (UploadArgs, DownloadArgs).
const (
	// PAXAppend marks an entry whose data continues the file before it.
	PAXAppend = "BOXD.append"
	// PAXPath is a file's path when the entry's name cannot carry it.
	PAXPath = "BOXD.path"
	// PAXMode is a file's mode in decimal, for one beyond 07777 (which
	// the init refuses, failing that file).
	PAXMode = "BOXD.mode"
	// PAXSize is a downloaded file's size as opened, in decimal, when it
	// is not the size of the file's first entry.
	PAXSize = "BOXD.size"
	// PAXCode and PAXMessage say why a downloaded file failed
	// (FileResult's Code and Message).
	PAXCode    = "BOXD.code"
	PAXMessage = "BOXD.message"
)

// BatchModeNone in a batch entry's mode field says the file has no mode:
// 0644 for a new file, the old mode for a replaced one. (A bit no tar
// writer sets, and a header that needs no PAX record.)
const BatchModeNone = 0o1000000

// UploadItem names one file of an upload. Each is written like file-write
// (atomically replaced, never through a final symlink).
type UploadItem struct {
	Path string  `json:"path"`
	Mode *uint32 `json:"mode,omitempty"`
}

// FileResult is the outcome of one file of a bulk operation. Code and
// Message are empty on success.
type FileResult struct {
	Index   int    `json:"index"`
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// DownloadArgs make a copy-out a batch of files: instead of a tree under
// Request.Path (which is BatchPath, so an init that predates batches
// refuses the request), the tar is Paths' files, each read as User like
// file-read, in the order asked, each with a result of its own.
//
// The tar is the batch's, in UploadArgs' form: a file the init opened is
// one entry per piece of its data (PAXAppend on all but the first), the
// first named after the file's clean absolute path and carrying its mode,
// owner and mtime (PAXSize when the file's size is not the first piece's);
// a file that could not be read, or failed part way, is an entry with
// PAXCode and PAXMessage, with PAXAppend if it ends a file begun. A file
// that ends without one was read whole.
type DownloadArgs struct {
	Paths    []string `json:"paths"`
	User     string   `json:"user,omitempty"`
	NoFollow bool     `json:"no_follow,omitempty"`
}

// WatchArgs are the parameters of file-watch.
type WatchArgs struct {
	Path      string `json:"path"`
	User      string `json:"user,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
}

// Watch event operations.
const (
	WatchCreate   = "create"
	WatchWrite    = "write"
	WatchRemove   = "remove"
	WatchRename   = "rename"
	WatchChmod    = "chmod"
	WatchOverflow = "overflow" // events were lost (queue overflow or watch limit)
)

// WatchEvent is one change under a watched directory.
type WatchEvent struct {
	Path    string `json:"path"` // absolute path inside the sandbox
	Op      string `json:"op"`
	OldPath string `json:"old_path,omitempty"` // rename: where it was
	IsDir   bool   `json:"is_dir,omitempty"`
	Message string `json:"message,omitempty"` // overflow: what was lost
}

// FileMode is the entry's type and permission bits (setuid, setgid and
// sticky included) as an fs.FileMode.
func (fi FileStat) FileMode() fs.FileMode {
	m := fs.FileMode(fi.Mode & 0o777)
	if fi.Mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if fi.Mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if fi.Mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	switch fi.Type {
	case FileTypeDir:
		m |= fs.ModeDir
	case FileTypeSymlink:
		m |= fs.ModeSymlink
	case FileTypeFIFO:
		m |= fs.ModeNamedPipe
	case FileTypeSocket:
		m |= fs.ModeSocket
	case FileTypeChar:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case FileTypeBlock:
		m |= fs.ModeDevice
	}
	return m
}
