package safetar

// bigWrite is the smallest write BatchWriter passes on as it is rather than
// gathering it.
const bigWrite = 64 << 10

// BatchWriter sends what is written to it through Send in pieces of at most
// Max bytes: small writes (tar headers and padding, small files) gathered,
// big ones (file data, which Write hands over a MiB at a time) as they are,
// without a copy. Few, big pieces are what make a large copy fast over a
// framed channel: boxd-init's tar frames, boxctl's CopyIn messages.
type BatchWriter struct {
	Send func([]byte) error // the slice is only valid during the call
	Max  int
	// Buf is where small writes gather: give it len 0 and cap Max (a pooled
	// buffer, say) and it never grows; nil grows as far as writes need.
	Buf []byte
}

func (w *BatchWriter) Write(p []byte) (int, error) {
	if len(p) >= bigWrite {
		if err := w.Flush(); err != nil {
			return 0, err
		}
		for off := 0; off < len(p); off += w.Max {
			if err := w.Send(p[off:min(off+w.Max, len(p))]); err != nil {
				return off, err
			}
		}
		return len(p), nil
	}
	if len(w.Buf)+len(p) > w.Max {
		if err := w.Flush(); err != nil {
			return 0, err
		}
	}
	w.Buf = append(w.Buf, p...)
	return len(p), nil
}

// Flush sends what is gathered.
func (w *BatchWriter) Flush() error {
	if len(w.Buf) == 0 {
		return nil
	}
	err := w.Send(w.Buf)
	w.Buf = w.Buf[:0]
	return err
}
