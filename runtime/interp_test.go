//go:build linux

package runtime

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
)

func frame(payload string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	return append(b, payload...)
}

// TestDriverFrames: whole frames are queued, a partial one kept, and a
// length prefix over the bound is refused before its bytes arrive.
func TestDriverFrames(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &interpDriver{ctx: ctx, msgs: make(chan driverMsg, driverQueue)}
	buf := append(frame(`{"t":"out","id":1,"s":"stdout","b":"hi"}`), frame(`{"t":"done","id":1}`)[:7]...)
	rest, err := d.frames(buf)
	if err != nil || len(rest) != 7 || len(d.msgs) != 1 {
		t.Fatalf("frames: rest %d, queued %d, %v", len(rest), len(d.msgs), err)
	}
	if m := <-d.msgs; m.T != "out" || m.B != "hi" {
		t.Errorf("decoded %+v", m)
	}
	huge := binary.BigEndian.AppendUint32(nil, 0xfffffff0)
	if _, err := d.frames(huge); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a 4 GiB length prefix: %v", err)
	}
	if _, err := d.frames(frame("not json")); err == nil {
		t.Error("garbage frame accepted")
	}
}

// TestDecodeBundle: only the fixed MIME types, PNG base64 decoded, JSON
// checked, the budget charged and kept.
func TestDecodeBundle(t *testing.T) {
	budget := int64(100)
	out, truncated, err := decodeBundle(map[string]string{
		"text/plain": "hello", "image/png": "aGk=\n", "application/javascript": "alert(1)",
		"application/json": `{"a":1}`,
	}, &budget)
	if err != nil || truncated {
		t.Fatal(err, truncated)
	}
	if len(out) != 3 || string(out["image/png"]) != "hi" || out["application/javascript"] != nil {
		t.Errorf("bundle %q", out)
	}
	if budget != 100-5-2-7 {
		t.Errorf("budget left %d", budget)
	}
	budget = 3
	out, truncated, _ = decodeBundle(map[string]string{"text/plain": "hello", "text/html": "<b>"}, &budget)
	if !truncated || string(out["text/html"]) != "<b>" || out["text/plain"] != nil {
		t.Errorf("over budget: %q truncated %v", out, truncated)
	}
	for _, bad := range []map[string]string{{"image/png": "%%%"}, {"application/json": "{"}} {
		b := int64(100)
		if _, _, err := decodeBundle(bad, &b); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestCodeRunBudget: output over the limit is dropped and flagged.
func TestCodeRunBudget(t *testing.T) {
	var got []byte
	r := &codeRun{res: &CodeResult{}, left: 4, rich: maxResultRich, out: func(_ string, b []byte) error {
		got = append(got, b...)
		return nil
	}}
	for _, s := range []string{"ab", "cde", "f"} {
		if _, err := r.handle(driverMsg{T: "out", S: "stdout", B: s}); err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != "abcd" || !r.res.Truncated {
		t.Errorf("streamed %q, truncated %v", got, r.res.Truncated)
	}
	if _, err := r.handle(driverMsg{T: "out", S: "other"}); err == nil {
		t.Error("a stream other than stdout and stderr accepted")
	}
}
