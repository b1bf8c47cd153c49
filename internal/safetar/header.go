package safetar

import (
	"archive/tar"
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// AppendFileHeader appends the header of a regular file entry with name,
// mode and size (AppendHeader). The data and its padding (Pad) are the
// caller's.
func AppendFileHeader(dst []byte, name string, mode, size int64, pax map[string]string) ([]byte, error) {
	return AppendHeader(dst, &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size, PAXRecords: pax})
}

// AppendHeader appends hdr's header blocks, and reports whether it could.
// A plain header (a file, directory or symlink whose name and link name
// are up to 100 ASCII bytes, numbers that fit USTAR's fields) is written
// directly: a USTAR block as archive/tar writes it, after a PAX block of
// hdr.PAXRecords and a sub-second mtime if there are any. archive/tar's
// Writer, checking every field for every format and building the PAX
// block through maps and sorts, takes several times longer. Anything
// else goes through that Writer. The data and its padding (Pad) are the
// caller's.
func AppendHeader(dst []byte, hdr *tar.Header) ([]byte, error) {
	if plainHeader(hdr) {
		sec, nsec := int64(0), 0
		if !hdr.ModTime.IsZero() {
			sec, nsec = hdr.ModTime.Unix(), hdr.ModTime.Nanosecond()
		}
		if sec >= 0 && sec < 1<<33 {
			if len(hdr.PAXRecords) > 0 || nsec != 0 {
				dst = appendPAX(dst, hdr.PAXRecords, sec, nsec)
			}
			return appendUSTAR(dst, hdr, sec), nil
		}
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(hdr); err != nil {
		return dst, err
	}
	return append(dst, b.Bytes()...), nil // the header blocks; tw is dropped
}

// plainHeader reports whether hdr's own fields fit a USTAR block as they
// are.
func plainHeader(hdr *tar.Header) bool {
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
	default:
		return false
	}
	return plainName(hdr.Name) && (hdr.Linkname == "" || plainName(hdr.Linkname)) &&
		hdr.Mode >= 0 && hdr.Mode < 1<<21 && hdr.Uid >= 0 && hdr.Uid < 1<<21 && hdr.Gid >= 0 && hdr.Gid < 1<<21 &&
		hdr.Size >= 0 && hdr.Size < 1<<33 && hdr.Uname == "" && hdr.Gname == "" && hdr.Devmajor == 0 && hdr.Devminor == 0 &&
		len(hdr.Xattrs) == 0 && hdr.AccessTime.IsZero() && hdr.ChangeTime.IsZero() && validRecords(hdr.PAXRecords)
}

// validRecords reports whether records are ones the PAX block may carry
// as they are: keys archive/tar reads back as they were, none that
// overrides a header field.
func validRecords(records map[string]string) bool {
	for k, v := range records {
		if k == "" || strings.ContainsAny(k, "=\x00") || !strings.HasPrefix(k, "BOXD.") || strings.IndexByte(v, 0) >= 0 {
			return false
		}
	}
	return true
}

// appendPAX appends a PAX extended header: its block and its records (the
// keys sorted, as archive/tar writes them), padded.
func appendPAX(dst []byte, records map[string]string, sec int64, nsec int) []byte {
	var keys [8]string
	ks := keys[:0]
	for k := range records {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var body [512]byte
	b := body[:0]
	if nsec != 0 {
		var t [32]byte
		v := strconv.AppendInt(t[:0], sec, 10)
		v = append(v, '.')
		for d := 100_000_000; d > 0 && nsec > 0; d /= 10 {
			v = append(v, byte('0'+nsec/d))
			nsec %= d
		}
		b = appendRecord(b, "mtime", v)
	}
	for _, k := range ks {
		b = appendRecord(b, k, records[k])
	}
	dst = appendUSTAR(dst, &tar.Header{Typeflag: tar.TypeXHeader, Name: "PaxHeader", Size: int64(len(b))}, 0)
	dst = append(dst, b...)
	return append(dst, Pad(int64(len(b)))...)
}

// appendRecord appends one PAX record, "LEN key=value\n", LEN counting
// itself.
func appendRecord[V string | []byte](b []byte, k string, v V) []byte {
	n := len(k) + len(v) + 3 // space, '=', newline
	size := n + len(strconv.Itoa(n))
	if len(strconv.Itoa(size)) != len(strconv.Itoa(n)) {
		size++
	}
	b = strconv.AppendInt(b, int64(size), 10)
	b = append(b, ' ')
	b = append(b, k...)
	b = append(b, '=')
	b = append(b, v...)
	return append(b, '\n')
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

// appendUSTAR appends a USTAR block for hdr (plain, with mtime sec), as
// archive/tar writes it: numbers in zero-padded octal ending in NUL.
func appendUSTAR(dst []byte, hdr *tar.Header, sec int64) []byte {
	off := len(dst)
	dst = append(dst, zeroBlock[:blockSize]...)
	b := dst[off : off+blockSize]
	copy(b[0:100], hdr.Name)
	octal(b[100:108], hdr.Mode)
	octal(b[108:116], int64(hdr.Uid))
	octal(b[116:124], int64(hdr.Gid))
	octal(b[124:136], hdr.Size)
	octal(b[136:148], sec)
	b[156] = hdr.Typeflag
	copy(b[157:257], hdr.Linkname)
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
