package host

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// batchFile is one entry of a batch's tar as readBatch reads it.
type batchFile struct {
	Name     string
	Mode     int64
	UID, GID int64
	Size     int64
	ModTime  time.Time
	// BOXD records of the entry's PAX header (wire.PAXAppend and friends).
	Records map[string]string
}

// maxPAXBlock bounds an entry's PAX records: an honest init's are a
// path, an mtime and an error message.
const maxPAXBlock = 64 << 10

// readBatch reads a batch's tar (wire.DownloadArgs' form) from the init
// and hands each entry to entry with a reader of its data, up to the
// end-of-archive marker. It reads exactly the form boxd writes (safetar's
// AppendHeader, or archive/tar's PAX for what that does not take): each
// entry a regular file, USTAR, after an optional PAX header whose records
// may set the path, owner, size and mtime or be boxd's own; anything
// else is a protocol error. It is archive/tar's reader cut to that form:
// a download reads two headers per file, and archive/tar spends most of
// a small file's time on checks for formats a batch never has.
func readBatch(r io.Reader, entry func(e *batchFile, data io.Reader) error) error {
	var blk [512]byte
	var pax []byte
	data := &io.LimitedReader{R: r}
	for {
		if _, err := io.ReadFull(r, blk[:]); err != nil {
			return batchErr("header", err)
		}
		if blk == [512]byte{} {
			if _, err := io.ReadFull(r, blk[:]); err != nil || blk != [512]byte{} {
				return fmt.Errorf("%w: batch tar: one zero block, not an end-of-archive marker", wire.ErrProtocol)
			}
			return nil
		}
		h, typ, err := parseUSTAR(&blk)
		if err != nil {
			return err
		}
		var records map[string]string
		if typ == 'x' {
			if h.Size > maxPAXBlock {
				return fmt.Errorf("%w: batch tar: PAX header of %d bytes", wire.ErrProtocol, h.Size)
			}
			need := int(h.Size) + len(safetar.Pad(h.Size))
			if cap(pax) < need {
				pax = make([]byte, need)
			}
			pax = pax[:need]
			if _, err := io.ReadFull(r, pax); err != nil {
				return batchErr("PAX header", err)
			}
			if records, err = parseRecords(pax[:h.Size]); err != nil {
				return err
			}
			if _, err := io.ReadFull(r, blk[:]); err != nil {
				return batchErr("header", err)
			}
			if h, typ, err = parseUSTAR(&blk); err != nil {
				return err
			}
			if typ == 'x' {
				return fmt.Errorf("%w: batch tar: two PAX headers for one entry", wire.ErrProtocol)
			}
		}
		if err := applyRecords(h, records); err != nil {
			return err
		}
		data.N = h.Size
		if err := entry(h, data); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, data); err != nil {
			return batchErr("data", err)
		}
		if data.N > 0 {
			return batchErr("data", io.ErrUnexpectedEOF)
		}
		if pad := safetar.Pad(h.Size); len(pad) > 0 {
			if _, err := io.ReadFull(r, blk[:len(pad)]); err != nil {
				return batchErr("padding", err)
			}
		}
	}
}

func batchErr(what string, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: batch tar ends inside a %s", wire.ErrProtocol, what)
	}
	return err
}

// parseUSTAR parses a USTAR block of a regular file or a PAX header.
func parseUSTAR(b *[512]byte) (*batchFile, byte, error) {
	bad := func(what string) (*batchFile, byte, error) {
		return nil, 0, fmt.Errorf("%w: batch tar: header with %s", wire.ErrProtocol, what)
	}
	if string(b[257:265]) != "ustar\x0000" {
		return bad("no USTAR magic")
	}
	sum, ok := octalField(b[148:156])
	if !ok {
		return bad("a malformed checksum")
	}
	var got int64
	for _, c := range b {
		got += int64(c)
	}
	for _, c := range b[148:156] { // summed as spaces
		got += int64(' ') - int64(c)
	}
	if got != sum {
		return bad("a wrong checksum")
	}
	typ := b[156]
	if typ != '0' && typ != 'x' {
		return bad(fmt.Sprintf("type %q", typ))
	}
	h := &batchFile{}
	var fields [5]int64
	for i, f := range [][]byte{b[100:108], b[108:116], b[116:124], b[124:136], b[136:148]} {
		if fields[i], ok = octalField(f); !ok {
			return bad("a malformed number")
		}
	}
	h.Mode, h.UID, h.GID, h.Size = fields[0], fields[1], fields[2], fields[3]
	h.ModTime = time.Unix(fields[4], 0)
	h.Name = cString(b[0:100])
	if prefix := cString(b[345:500]); prefix != "" {
		h.Name = prefix + "/" + h.Name
	}
	if b[157] != 0 {
		return bad("a link name")
	}
	return h, typ, nil
}

// octalField parses a USTAR number: octal digits, ended by NUL or space
// (leading spaces allowed, as archive/tar writes none but others do).
func octalField(f []byte) (int64, bool) {
	i := 0
	for i < len(f) && f[i] == ' ' {
		i++
	}
	var n int64
	for ; i < len(f) && f[i] >= '0' && f[i] <= '7'; i++ {
		if n > math.MaxInt64>>3 {
			return 0, false
		}
		n = n<<3 | int64(f[i]-'0')
	}
	for ; i < len(f); i++ {
		if f[i] != 0 && f[i] != ' ' {
			return 0, false
		}
	}
	return n, true
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// parseRecords parses PAX records, "LEN key=value\n" each.
func parseRecords(b []byte) (map[string]string, error) {
	records := map[string]string{}
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("%w: batch tar: malformed PAX record", wire.ErrProtocol)
		}
		n, err := strconv.Atoi(string(b[:sp]))
		if err != nil || n <= sp+3 || n > len(b) || b[n-1] != '\n' {
			return nil, fmt.Errorf("%w: batch tar: malformed PAX record", wire.ErrProtocol)
		}
		kv := b[sp+1 : n-1]
		eq := bytes.IndexByte(kv, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("%w: batch tar: malformed PAX record", wire.ErrProtocol)
		}
		records[string(kv[:eq])] = string(kv[eq+1:])
		b = b[n:]
	}
	return records, nil
}

// applyRecords applies the standard records a PAX header may carry and
// keeps boxd's own; any other is refused.
func applyRecords(h *batchFile, records map[string]string) error {
	for k, v := range records {
		var err error
		switch k {
		case "path":
			h.Name = v
		case "uid", "gid", "size":
			var n int64
			if n, err = strconv.ParseInt(v, 10, 64); err == nil && (n < 0 || n > math.MaxInt64/2) {
				err = strconv.ErrRange
			}
			switch k {
			case "uid":
				h.UID = n
			case "gid":
				h.GID = n
			default:
				h.Size = n
			}
		case "mtime":
			h.ModTime, err = parsePAXTime(v)
		case wire.PAXAppend, wire.PAXSize, wire.PAXCode, wire.PAXMessage:
			if h.Records == nil {
				h.Records = map[string]string{}
			}
			h.Records[k] = v
		default:
			err = fmt.Errorf("unexpected")
		}
		if err != nil {
			return fmt.Errorf("%w: batch tar: PAX record %.40q: %v", wire.ErrProtocol, k, err)
		}
	}
	return nil
}

// parsePAXTime parses "[-]SECONDS[.FRACTION]" as archive/tar writes it
// (a negative time is minus all of it); nanoseconds are kept.
func parsePAXTime(v string) (time.Time, error) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	secs, frac, _ := strings.Cut(v, ".")
	if secs == "" || secs[0] == '+' || secs[0] == '-' {
		return time.Time{}, strconv.ErrSyntax
	}
	sec, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	var nsec int64
	for i := range max(len(frac), 9) {
		var c byte = '0'
		if i < len(frac) {
			c = frac[i]
		}
		if c < '0' || c > '9' {
			return time.Time{}, strconv.ErrSyntax
		}
		if i < 9 {
			nsec = nsec*10 + int64(c-'0')
		}
	}
	if neg {
		return time.Unix(-sec, -nsec), nil
	}
	return time.Unix(sec, nsec), nil
}
