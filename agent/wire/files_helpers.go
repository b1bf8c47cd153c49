package wire

// The agent file helpers: what an agent's tools need beyond whole-file
// reads and writes, done by the init inside the sandbox so that no file
// content crosses the channel twice and no symlink is followed out of the
// tree being searched. Each is one connection:
//
//	file-read-lines: -> request{args}  <- result(ReadLinesResult) | error
//	file-edit:       -> request{args}  <- result(EditResult) | error
//	file-glob:       -> request{args}  <- result([]FileStat)* (ok(SearchSummary) | error)
//	file-grep:       -> request{args}  <- result([]GrepMatch)* (ok(SearchSummary) | error)
//	file-chown:      -> request{args}  <- ok | error
//
// Closing the connection stops a glob or grep in the init.

import (
	"fmt"
	"path"
	"strings"
)

// Operations of the file helpers.
const (
	OpFileReadLines = "file-read-lines"
	OpFileEdit      = "file-edit"
	OpFileGlob      = "file-glob"
	OpFileGrep      = "file-grep"
	OpFileChown     = "file-chown"
)

// Bounds of the file helpers. Every answer fits in bounded memory on both
// sides whatever the sandbox holds: a read-lines answer is one frame; a
// glob's or grep's answer is at most MaxSearchResultBytes of JSON.
const (
	DefaultReadLines = 2000
	MaxReadLines     = 100000
	// DefaultLineBytes is where read-lines and grep cut a long line (the
	// cut is marked); MaxLineBytes the most a caller may ask for.
	DefaultLineBytes = 4096
	MaxLineBytes     = 256 << 10
	// ReadLinesBudget is the most JSON line data in one read-lines answer,
	// below MaxFramePayload with room for the file's description.
	ReadLinesBudget = 900 << 10
	// MaxEditBytes bounds the file an edit rewrites: the init holds it in
	// memory (the sandbox's memory) twice.
	MaxEditBytes = 32 << 20
	// MaxEditString bounds old and new; the API message cap is the real
	// limit, this keeps the request frame below MaxFramePayload.
	MaxEditString = 256 << 10

	DefaultSearchResults = 1000
	MaxSearchResults     = 10000
	// MaxSearchEntries bounds the directory entries one glob or grep
	// looks at: a pattern that would walk millions of files stops there,
	// with Truncated set.
	MaxSearchEntries = 200000
	// MaxGrepBytes bounds the file data one grep reads.
	MaxGrepBytes = 1 << 30
	// MaxSearchResultBytes bounds the JSON of one glob's or grep's results.
	MaxSearchResultBytes = 4 << 20
	// MaxPatternLen bounds glob and grep patterns.
	MaxPatternLen = 4096
)

// ReadLinesArgs are the parameters of file-read-lines.
type ReadLinesArgs struct {
	Path string `json:"path"`
	User string `json:"user,omitempty"`
	// Offset is how many lines to skip; the first line returned is line
	// Offset+1.
	Offset int64 `json:"offset,omitempty"`
	// Limit is the most lines to return: 0 means DefaultReadLines.
	Limit int `json:"limit,omitempty"`
	// MaxLineBytes cuts longer lines: 0 means DefaultLineBytes.
	MaxLineBytes int `json:"max_line_bytes,omitempty"`
}

// Line is one line of a file, or of a grep match: N is its 1-based
// number, T its text without the newline (invalid UTF-8 replaced by
// U+FFFD), Cut whether it was longer than the line limit.
type Line struct {
	N   int64  `json:"n"`
	T   string `json:"t"`
	Cut bool   `json:"cut,omitempty"`
}

// ReadLinesResult is what file-read-lines returns.
type ReadLinesResult struct {
	Stat  FileStat `json:"stat"`
	Lines []Line   `json:"lines"`
	// EOF: the file ends with the last line returned (or before Offset).
	EOF bool `json:"eof,omitempty"`
	// Full: the answer stopped at ReadLinesBudget before Limit lines;
	// read on from the last line's number.
	Full bool `json:"full,omitempty"`
	// Binary: the file's first 8 KiB hold a NUL byte, so it is most
	// likely not text.
	Binary bool `json:"binary,omitempty"`
}

// EditArgs are the parameters of file-edit: replace Old by New in the file
// at Path, once (Old must occur exactly once) or, with All, everywhere.
type EditArgs struct {
	Path string `json:"path"`
	User string `json:"user,omitempty"`
	Old  string `json:"old"`
	New  string `json:"new"`
	All  bool   `json:"all,omitempty"`
}

// EditResult is what file-edit returns.
type EditResult struct {
	Replacements int      `json:"replacements"`
	Line         int64    `json:"line"` // where the first replacement starts
	Stat         FileStat `json:"stat"`
}

// GlobArgs are the parameters of file-glob.
type GlobArgs struct {
	// Pattern is matched against paths below Path (or, absolute, from the
	// root): '*', '?' and '[...]' within a name, "**" for any number of
	// directories. Names starting with '.' match too.
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"` // default: the workdir
	User    string `json:"user,omitempty"`
	Limit   int    `json:"limit,omitempty"` // 0: DefaultSearchResults
}

// GrepArgs are the parameters of file-grep.
type GrepArgs struct {
	Pattern string `json:"pattern"`        // RE2 syntax, matched per line
	Path    string `json:"path,omitempty"` // a file or a directory; default: the workdir
	// Glob keeps only files whose name (a pattern without '/') or path
	// relative to Path (with '/') matches.
	Glob         string `json:"glob,omitempty"`
	User         string `json:"user,omitempty"`
	Limit        int    `json:"limit,omitempty"` // most matches; 0: DefaultSearchResults
	IgnoreCase   bool   `json:"ignore_case,omitempty"`
	Literal      bool   `json:"literal,omitempty"` // Pattern is a plain string
	MaxLineBytes int    `json:"max_line_bytes,omitempty"`
}

// GrepMatch is one matching line; for a binary file (a NUL byte in its
// first 8 KiB) one match with Binary set and no line stands for the file.
type GrepMatch struct {
	Path   string `json:"path"`
	Line   Line   `json:"line"`
	Binary bool   `json:"binary,omitempty"`
}

// SearchSummary ends a glob or grep.
type SearchSummary struct {
	Truncated bool   `json:"truncated,omitempty"`
	Reason    string `json:"reason,omitempty"` // why it is truncated
	Entries   int    `json:"entries"`          // directory entries looked at
}

// ChownArgs are the parameters of file-chown.
type ChownArgs struct {
	Path string `json:"path"`
	User string `json:"user,omitempty"`
	// Owner is USER, USER:GROUP, USER: (the user's login group) or :GROUP,
	// names or ids, looked up in the sandbox.
	Owner     string `json:"owner"`
	Recursive bool   `json:"recursive,omitempty"`
}

// CheckGlob reports why pattern is no glob pattern.
func CheckGlob(field, pattern string) error {
	switch {
	case pattern == "":
		return fmt.Errorf("%w: %s: empty pattern", ErrInvalid, field)
	case len(pattern) > MaxPatternLen:
		return fmt.Errorf("%w: %s: %d bytes, at most %d", ErrInvalid, field, len(pattern), MaxPatternLen)
	case strings.IndexByte(pattern, 0) >= 0:
		return fmt.Errorf("%w: %s: contains a NUL byte", ErrInvalid, field)
	}
	for _, seg := range strings.Split(pattern, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("%w: %s: %q is not a valid pattern: %v", ErrInvalid, field, pattern, err)
		}
	}
	return nil
}

// CheckOwnerSpec reports whether spec is syntactically a chown owner:
// USER, USER:GROUP, USER: or :GROUP, each a name or a decimal id.
func CheckOwnerSpec(spec string) error {
	if len(spec) > MaxUserLen {
		return fmt.Errorf("%w: owner: %d bytes, at most %d allowed", ErrInvalid, len(spec), MaxUserLen)
	}
	user, group, _ := strings.Cut(spec, ":")
	if (user == "" && group == "") || (user != "" && !ValidAccountName(user)) || (group != "" && !ValidAccountName(group)) {
		return fmt.Errorf("%w: owner: %q is not USER, USER:GROUP, USER: or :GROUP", ErrInvalid, spec)
	}
	return nil
}

// HasMeta reports whether a pattern segment has glob metacharacters.
func HasMeta(seg string) bool { return strings.ContainsAny(seg, `*?[\`) }

// MatchGlob reports whether the relative, '/'-separated path name matches
// pattern: segments match with path.Match, and a "**" segment matches any
// number of segments, none included, except at the end, where it matches
// what is below (one or more), as a glob walk finds it.
func MatchGlob(pattern, name string) bool {
	pat := strings.Split(pattern, "/")
	if pat[len(pat)-1] == "**" {
		pat = append(pat[:len(pat)-1], "*", "**")
	}
	return matchSegs(pat, strings.Split(name, "/"))
}

// matchSegs is the classic wildcard match with "**" as the star and a
// segment as the character: on a mismatch only the last "**" takes one more
// segment, which is enough (a later star covers what an earlier one
// could), so it runs in O(len(pat)*len(name)) whatever the pattern.
func matchSegs(pat, name []string) bool {
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pat) && pat[p] == "**" {
			starP, starN = p, n
			p++
			continue
		}
		if p < len(pat) {
			if ok, _ := path.Match(pat[p], name[n]); ok {
				p++
				n++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		p = starP + 1
		starN++
		n = starN
	}
	for p < len(pat) && pat[p] == "**" {
		p++
	}
	return p == len(pat)
}
