//go:build linux

package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// The file helpers' answers are held to what was asked: a hijacked init
// cannot hand boxd more lines or results than the limit, lines out of
// order, an edit that claims what was not asked, or an endless search.
func TestHostileHelperAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	protocol := func(t *testing.T, err error, want string) {
		t.Helper()
		if !errors.Is(err, wire.ErrProtocol) || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want a protocol error about %q", err, want)
		}
	}
	lines := func(ls ...wire.Line) func(fr *wire.FrameReader, fw *wire.FrameWriter) {
		return func(fr *wire.FrameReader, fw *wire.FrameWriter) {
			fw.WriteJSON(wire.FrameResult, wire.ReadLinesResult{Lines: ls})
		}
	}
	c := hostileInit(t, lines(wire.Line{N: 1}, wire.Line{N: 2}, wire.Line{N: 3}))
	_, err := c.ReadLines(ctx, wire.ReadLinesArgs{Path: "f", Limit: 2})
	protocol(t, err, "3 lines where at most 2")
	c = hostileInit(t, lines(wire.Line{N: 5}))
	_, err = c.ReadLines(ctx, wire.ReadLinesArgs{Path: "f", Offset: 1})
	protocol(t, err, "line 5 where 2 was next")
	c = hostileInit(t, lines(wire.Line{N: 1, T: strings.Repeat("x", 20000)}))
	_, err = c.ReadLines(ctx, wire.ReadLinesArgs{Path: "f", MaxLineBytes: 100})
	protocol(t, err, "not what was asked")

	c = hostileInit(t, func(fr *wire.FrameReader, fw *wire.FrameWriter) {
		fw.WriteJSON(wire.FrameResult, wire.EditResult{Replacements: 7, Line: 1})
	})
	_, err = c.EditFile(ctx, wire.EditArgs{Path: "f", Old: "a"})
	protocol(t, err, "7 replacements")

	// Results past the limit, and a search that never ends its stream.
	c = hostileInit(t, func(fr *wire.FrameReader, fw *wire.FrameWriter) {
		for i := 0; i < 100; i++ {
			if fw.WriteJSON(wire.FrameResult, []wire.FileStat{{Path: "/x"}, {Path: "/y"}}) != nil {
				return
			}
		}
	})
	_, _, err = c.Glob(ctx, wire.GlobArgs{Pattern: "*", Limit: 5})
	protocol(t, err, "where at most 5")
	c = hostileInit(t, func(fr *wire.FrameReader, fw *wire.FrameWriter) {
		big := make([]wire.GrepMatch, 2000)
		for i := range big {
			big[i] = wire.GrepMatch{Path: strings.Repeat("p", 400), Line: wire.Line{N: 1}}
		}
		for i := 0; i < 100; i++ {
			if fw.WriteJSON(wire.FrameResult, big[:0]) != nil || fw.WriteJSON(wire.FrameResult, big[:1000]) != nil {
				return
			}
		}
	})
	_, _, err = c.Grep(ctx, wire.GrepArgs{Pattern: "x", Limit: wire.MaxSearchResults})
	if !errors.Is(err, wire.ErrProtocol) {
		t.Errorf("oversized grep answer: %v", err)
	}
}
