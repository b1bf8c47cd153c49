//go:build linux

package runtime

import (
	"context"
	"regexp"

	"github.com/boxd-dev/boxd/agent/wire"
)

// The agent file helpers, done by the sandbox's init (see
// wire.ReadLinesArgs and friends). Fields are checked here so errors name
// them; the init checks again.

func checkRange(field string, v, max int) error {
	if v < 0 || v > max {
		return fieldErr(field, "%d: must be between 0 (the default) and %d", v, max)
	}
	return nil
}

// ReadLines returns lines of a file in the sandbox.
func (m *Manager) ReadLines(ctx context.Context, idOrName string, a wire.ReadLinesArgs) (wire.ReadLinesResult, error) {
	if a.Offset < 0 {
		return wire.ReadLinesResult{}, fieldErr("offset", "%d is negative", a.Offset)
	}
	if err := checkRange("limit", a.Limit, wire.MaxReadLines); err != nil {
		return wire.ReadLinesResult{}, err
	}
	if err := checkRange("max_line_bytes", a.MaxLineBytes, wire.MaxLineBytes); err != nil {
		return wire.ReadLinesResult{}, err
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return wire.ReadLinesResult{}, err
	}
	res, err := c.ReadLines(ctx, a)
	return res, m.fileErr(ctx, id, err)
}

// EditFile replaces text in a file in the sandbox.
func (m *Manager) EditFile(ctx context.Context, idOrName string, a wire.EditArgs) (wire.EditResult, error) {
	switch {
	case a.Old == "":
		return wire.EditResult{}, fieldErr("old_string", "empty: there is nothing to replace")
	case len(a.Old) > wire.MaxEditString:
		return wire.EditResult{}, fieldErr("old_string", "%d bytes, at most %d", len(a.Old), wire.MaxEditString)
	case len(a.New) > wire.MaxEditString:
		return wire.EditResult{}, fieldErr("new_string", "%d bytes, at most %d", len(a.New), wire.MaxEditString)
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return wire.EditResult{}, err
	}
	res, err := c.EditFile(ctx, a)
	return res, m.fileErr(ctx, id, err)
}

// Glob finds the paths matching a pattern in the sandbox.
func (m *Manager) Glob(ctx context.Context, idOrName string, a wire.GlobArgs) ([]wire.FileStat, wire.SearchSummary, error) {
	if err := fileFieldErr("pattern", wire.CheckGlob("pattern", a.Pattern)); err != nil {
		return nil, wire.SearchSummary{}, err
	}
	if err := checkRange("limit", a.Limit, wire.MaxSearchResults); err != nil {
		return nil, wire.SearchSummary{}, err
	}
	paths := map[string]string{}
	if a.Path != "" {
		paths["path"] = a.Path
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, paths)
	if err != nil {
		return nil, wire.SearchSummary{}, err
	}
	out, sum, err := c.Glob(ctx, a)
	return out, sum, m.fileErr(ctx, id, err)
}

// Grep searches files in the sandbox for lines matching a pattern.
func (m *Manager) Grep(ctx context.Context, idOrName string, a wire.GrepArgs) ([]wire.GrepMatch, wire.SearchSummary, error) {
	switch {
	case a.Pattern == "":
		return nil, wire.SearchSummary{}, fieldErr("pattern", "empty")
	case len(a.Pattern) > wire.MaxPatternLen:
		return nil, wire.SearchSummary{}, fieldErr("pattern", "%d bytes, at most %d", len(a.Pattern), wire.MaxPatternLen)
	}
	if !a.Literal {
		if _, err := regexp.Compile(a.Pattern); err != nil {
			return nil, wire.SearchSummary{}, fieldErr("pattern", "not a regular expression (RE2 syntax): %v", err)
		}
	}
	if a.Glob != "" {
		if err := fileFieldErr("glob", wire.CheckGlob("glob", a.Glob)); err != nil {
			return nil, wire.SearchSummary{}, err
		}
	}
	if err := checkRange("limit", a.Limit, wire.MaxSearchResults); err != nil {
		return nil, wire.SearchSummary{}, err
	}
	if err := checkRange("max_line_bytes", a.MaxLineBytes, wire.MaxLineBytes); err != nil {
		return nil, wire.SearchSummary{}, err
	}
	paths := map[string]string{}
	if a.Path != "" {
		paths["path"] = a.Path
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, paths)
	if err != nil {
		return nil, wire.SearchSummary{}, err
	}
	out, sum, err := c.Grep(ctx, a)
	return out, sum, m.fileErr(ctx, id, err)
}

// ChownPath changes the owner of a path (or tree) in the sandbox.
func (m *Manager) ChownPath(ctx context.Context, idOrName string, a wire.ChownArgs) error {
	if err := fileFieldErr("owner", wire.CheckOwnerSpec(a.Owner)); err != nil {
		return err
	}
	c, id, err := m.fileAgent(ctx, idOrName, a.User, map[string]string{"path": a.Path})
	if err != nil {
		return err
	}
	return m.fileErr(ctx, id, c.ChownPath(ctx, a))
}
