package safetar

import (
	"archive/tar"
	"bytes"
	"strconv"
)

// AppendFileHeader appends the header of a regular file entry with name,
// mode and size, and reports whether it could: a plain USTAR block is
// written directly, which archive/tar's Writer, checking every field for
// every format, takes several times longer to do; anything that needs
// more (a long or non-ASCII name, a PAX record) goes through that Writer.
// The data and its padding (Pad) are the caller's.
func AppendFileHeader(dst []byte, name string, mode, size int64, pax map[string]string) ([]byte, error) {
	if len(pax) == 0 && plainName(name) && mode >= 0 && mode < 1<<21 && size >= 0 && size < 1<<33 {
		return appendUSTAR(dst, name, mode, size), nil
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size, PAXRecords: pax}
	if err := tw.WriteHeader(hdr); err != nil {
		return dst, err
	}
	return append(dst, b.Bytes()...), nil // the header blocks; tw is dropped
}

// Pad is the zero padding that ends an entry of size bytes.
func Pad(size int64) []byte { return zeroBlock[:(blockSize-size%blockSize)%blockSize] }

// Trailer is the end-of-archive marker.
func Trailer() []byte { return zeroBlock[:] }

const blockSize = 512

var zeroBlock [2 * blockSize]byte

// plainName is a name a USTAR name field holds as it is.
func plainName(name string) bool {
	if name == "" || len(name) > 100 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == 0 || c >= 0x80 {
			return false
		}
	}
	return true
}

// appendUSTAR appends a USTAR block for a regular file, as archive/tar
// writes it: numbers in zero-padded octal ending in NUL, mtime 0, owner 0.
func appendUSTAR(dst []byte, name string, mode, size int64) []byte {
	off := len(dst)
	dst = append(dst, zeroBlock[:blockSize]...)
	b := dst[off : off+blockSize]
	copy(b[0:100], name)
	octal(b[100:108], mode)
	octal(b[108:116], 0) // uid
	octal(b[116:124], 0) // gid
	octal(b[124:136], size)
	octal(b[136:148], 0) // mtime
	b[156] = tar.TypeReg
	copy(b[257:265], "ustar\x0000")
	octal(b[329:337], 0) // devmajor
	octal(b[337:345], 0) // devminor
	copy(b[148:156], "        ")
	sum := int64(0)
	for _, c := range b {
		sum += int64(c)
	}
	octal(b[148:155], sum) // six digits, NUL, and the space already there
	return dst
}

// octal writes x zero-padded in octal, ending in NUL, filling f.
func octal(f []byte, x int64) {
	var a [24]byte
	s := strconv.AppendInt(a[:0], x, 8)
	n := len(f) - 1 - len(s)
	for i := range n {
		f[i] = '0'
	}
	copy(f[n:], s)
	f[len(f)-1] = 0
}
