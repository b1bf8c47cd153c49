package main

import (
	"io"
	"os"
	"strings"
	"testing"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestPrintJSONIsStable: inspect output is spelled the same by every
// build: protojson alone adds a second space after some colons in some
// builds, which broke scripts and tests matching `"key": "value"`.
func TestPrintJSONIsStable(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	err = printJSON(&boxdv1.Sandbox{Id: "abc", DiskBytes: 10 << 30})
	os.Stdout = stdout
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	out := string(b)
	for _, want := range []string{"{\n  \"id\": \"abc\",\n", "\n  \"disk_bytes\": \"10737418240\",\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("printJSON output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ":  ") {
		t.Errorf("printJSON output has a doubled space:\n%s", out)
	}
}
