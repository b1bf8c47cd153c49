package host

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/boxd-dev/boxd/agent/wire"
)

// The agent file helpers (see wire.ReadLinesArgs and friends). What the
// init answers is checked against what was asked: no more lines or
// results than the limit, line numbers in order from the offset, texts no
// longer than the line limit, valid UTF-8, and nothing beyond the result
// budget.

// ReadLines returns lines of a file, numbered from a.Offset+1.
func (c *Client) ReadLines(ctx context.Context, a wire.ReadLinesArgs) (wire.ReadLinesResult, error) {
	var res wire.ReadLinesResult
	cn, err := c.openFileOp(ctx, wire.OpFileReadLines, a)
	if err != nil {
		return res, fileError(ctx, "read", a.Path, err)
	}
	defer cn.close()
	if err := cn.readReplyMax(wire.FrameResult, &res, wire.MaxFramePayload); err != nil {
		return res, fileError(ctx, "read", a.Path, err)
	}
	limit := a.Limit
	if limit == 0 {
		limit = wire.DefaultReadLines
	}
	maxLine := a.MaxLineBytes
	if maxLine == 0 {
		maxLine = wire.DefaultLineBytes
	}
	if len(res.Lines) > limit {
		return res, fileError(ctx, "read", a.Path, fmt.Errorf("%w: %d lines where at most %d were asked for", wire.ErrProtocol, len(res.Lines), limit))
	}
	for i, l := range res.Lines {
		if l.N != a.Offset+int64(i)+1 {
			return res, fileError(ctx, "read", a.Path, fmt.Errorf("%w: line %d where %d was next", wire.ErrProtocol, l.N, a.Offset+int64(i)+1))
		}
		if err := checkLine(l, maxLine); err != nil {
			return res, fileError(ctx, "read", a.Path, err)
		}
	}
	return res, nil
}

// checkLine checks a line from the init: valid UTF-8 (the API's strings
// must be) and no longer than the limit allows once invalid bytes were
// replaced (each by at most the 3 bytes of U+FFFD).
func checkLine(l wire.Line, maxLine int) error {
	if len(l.T) > 3*maxLine || !utf8.ValidString(l.T) {
		return fmt.Errorf("%w: line %d is not what was asked for (%d bytes, at most %d)", wire.ErrProtocol, l.N, len(l.T), maxLine)
	}
	return nil
}

// EditFile replaces a.Old with a.New in a file, atomically.
func (c *Client) EditFile(ctx context.Context, a wire.EditArgs) (wire.EditResult, error) {
	var res wire.EditResult
	if err := c.simpleFileOp(ctx, wire.OpFileEdit, "edit", a.Path, a, wire.FrameResult, &res); err != nil {
		return res, err
	}
	if res.Replacements < 1 || (!a.All && res.Replacements != 1) || res.Line < 1 {
		return res, fileError(ctx, "edit", a.Path, fmt.Errorf("%w: edit reports %d replacements at line %d", wire.ErrProtocol, res.Replacements, res.Line))
	}
	return res, nil
}

// ChownPath changes the owner of a path (with Recursive, of a tree, never
// following symlinks).
func (c *Client) ChownPath(ctx context.Context, a wire.ChownArgs) error {
	return c.simpleFileOp(ctx, wire.OpFileChown, "chown", a.Path, a, wire.FrameOK, nil)
}

// Glob returns the paths matching a.Pattern, in the order found, and
// whether the search stopped early.
func (c *Client) Glob(ctx context.Context, a wire.GlobArgs) ([]wire.FileStat, wire.SearchSummary, error) {
	var out []wire.FileStat
	sum, err := c.search(ctx, wire.OpFileGlob, "glob", a.Pattern, a, a.Limit, func(b []byte) (int, error) {
		var batch []wire.FileStat
		if err := json.Unmarshal(b, &batch); err != nil {
			return 0, err
		}
		out = append(out, batch...)
		return len(batch), nil
	})
	return out, sum, err
}

// Grep returns the lines matching a.Pattern, and whether the search
// stopped early.
func (c *Client) Grep(ctx context.Context, a wire.GrepArgs) ([]wire.GrepMatch, wire.SearchSummary, error) {
	maxLine := a.MaxLineBytes
	if maxLine == 0 {
		maxLine = wire.DefaultLineBytes
	}
	var out []wire.GrepMatch
	sum, err := c.search(ctx, wire.OpFileGrep, "grep", a.Path, a, a.Limit, func(b []byte) (int, error) {
		var batch []wire.GrepMatch
		if err := json.Unmarshal(b, &batch); err != nil {
			return 0, err
		}
		for _, m := range batch {
			if err := checkLine(m.Line, maxLine); err != nil {
				return 0, err
			}
		}
		out = append(out, batch...)
		return len(batch), nil
	})
	return out, sum, err
}

// search reads a glob's or grep's result batches and summary, holding
// the init to the limit and the result budget.
func (c *Client) search(ctx context.Context, op, name, path string, args any, limit int, batch func([]byte) (int, error)) (wire.SearchSummary, error) {
	var sum wire.SearchSummary
	if limit == 0 {
		limit = wire.DefaultSearchResults
	}
	cn, err := c.openFileOp(ctx, op, args)
	if err != nil {
		return sum, fileError(ctx, name, path, err)
	}
	defer cn.close()
	results, size := 0, 0
	err = cn.readResults(name, func(p []byte) error {
		size += len(p)
		if size > wire.MaxSearchResultBytes+wire.MaxFramePayload {
			return fmt.Errorf("%w: %s results beyond %d bytes", wire.ErrProtocol, name, wire.MaxSearchResultBytes)
		}
		n, err := batch(p)
		if err != nil {
			return fmt.Errorf("%w: malformed %s results: %v", wire.ErrProtocol, name, err)
		}
		if results += n; results > limit {
			return fmt.Errorf("%w: %d %s results where at most %d were asked for", wire.ErrProtocol, results, name, limit)
		}
		return nil
	}, func(p []byte) error {
		if err := json.Unmarshal(p, &sum); err != nil {
			return fmt.Errorf("%w: malformed %s summary: %v", wire.ErrProtocol, name, err)
		}
		if len(sum.Reason) > 256 || !utf8.ValidString(sum.Reason) {
			sum.Reason = "the search stopped early"
		}
		return nil
	})
	if err != nil {
		return sum, fileError(ctx, name, path, err)
	}
	return sum, nil
}
