package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// errNotArchive: an import's data does not begin as a tar does. containerd's
// importer would say "unexpected EOF" of a short file, or "invalid tar
// header", neither of which tells the user they sent the wrong file.
var errNotArchive = fmt.Errorf("data: not a tar or OCI archive (want an uncompressed tar: an OCI layout or docker save): %w", errdefs.ErrInvalidArgument)

// sniffTar reads r's first 512-byte block and refuses data that is not a tar
// header (or the zero block of an empty tar); it returns a reader of all of
// r's data.
func sniffTar(r io.Reader) (io.Reader, error) {
	block := make([]byte, 512)
	n, err := io.ReadFull(r, block)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("data: read: %w", err)
	}
	if n < len(block) || !isTarHeader(block) {
		return nil, errNotArchive
	}
	return io.MultiReader(bytes.NewReader(block), r), nil
}

// isTarHeader checks a header block's checksum, as archive/tar does: the
// sum of its bytes with the checksum field read as spaces, in octal at
// offset 148. Every tar format (v7, ustar, pax, GNU) has it.
func isTarHeader(b []byte) bool {
	if bytes.Count(b, []byte{0}) == len(b) {
		return true
	}
	want, err := strconv.ParseInt(strings.Trim(string(b[148:156]), " \x00"), 8, 64)
	if err != nil {
		return false
	}
	var unsigned, signed int64 // some old tars summed signed bytes
	for i, c := range b {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	return want == unsigned || want == signed
}
