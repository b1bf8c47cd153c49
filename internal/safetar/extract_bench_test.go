//go:build linux

package safetar

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// BenchmarkExtractTree extracts a tree of 1,000 small files (100 B to
// 8 KiB, directories of ten, as make bench's files scenario writes it)
// under a new name each time, as a copy into a sandbox does, into the file
// system under $TMPDIR. Compare builds with benchstat.
func BenchmarkExtractTree(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	entries := []entry{dir("tree/")}
	for i := range 1000 {
		if i%10 == 0 {
			entries = append(entries, dir(fmt.Sprintf("tree/d%02d/s%d/", i/100, i/10%10)))
		}
		body := make([]byte, 100+rng.IntN(8<<10-100))
		for j := range body {
			body[j] = byte('a' + rng.IntN(26))
		}
		entries = append(entries, reg(fmt.Sprintf("tree/d%02d/s%d/f%d.txt", i/100, i/10%10, i%10), string(body)))
	}
	arch := buildTar(b, entries...)
	// Not b.TempDir: removing 1,000s of files just before the next run
	// would time ext4's slow reuse of freshly freed inodes (bench/README.md,
	// files). $BENCH_EXTRACT_DIR, if set, is used and left as it is.
	dest := os.Getenv("BENCH_EXTRACT_DIR")
	if dest == "" {
		dest = b.TempDir()
	}
	dest, err := os.MkdirTemp(dest, "extract-")
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		n++
		if err := Extract(bytes.NewReader(arch), dest, Options{Rename: fmt.Sprintf("t%d", n)}); err != nil {
			b.Fatal(err)
		}
	}
}
