package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// progressView draws a pull's or push's progress, one line per blob as
// docker pull does, redrawn in place on a terminal (stderr). When stderr
// is not a terminal it draws nothing: scripts get the result line only.
type progressView struct {
	w     io.Writer
	on    bool
	lines int // lines drawn last time
}

func newProgressView(quiet bool) *progressView {
	return &progressView{w: os.Stderr, on: !quiet && term.IsTerminal(int(os.Stderr.Fd()))}
}

func (v *progressView) show(p *boxdv1.TransferProgress) {
	if !v.on || p == nil {
		return
	}
	var b strings.Builder
	if v.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.lines)
	}
	n := 0
	line := func(s string) {
		b.WriteString("\r\x1b[2K")
		b.WriteString(s)
		b.WriteString("\n")
		n++
	}
	for _, bl := range p.Blobs {
		line(blobLine(bl))
	}
	line(p.Phase)
	v.lines = n
	_, _ = io.WriteString(v.w, b.String())
}

func blobLine(bl *boxdv1.BlobProgress) string {
	d := bl.Digest
	if _, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		d = hex[:12]
	}
	s := fmt.Sprintf("%s %-8s %-11s", d, bl.Kind, bl.Status)
	switch bl.Status {
	case "downloading", "uploading":
		s += fmt.Sprintf(" %s %9s / %s", bar(bl.Done, bl.Size), humanSize(bl.Done), humanSize(bl.Size))
	case "done", "pushed", "exists":
		s += fmt.Sprintf(" %s", humanSize(bl.Size))
	}
	return s
}

func bar(done, size int64) string {
	const width = 30
	n := 0
	if size > 0 {
		n = int(min(done, size) * width / size)
	}
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "]"
}
