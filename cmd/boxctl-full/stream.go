package main

import (
	"errors"
	"io"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// sendChunks reads r to the end and hands it to send in chunkSize pieces,
// so a large upload never sits whole in memory.
func sendChunks(r io.Reader, send func([]byte) error) error {
	buf := make([]byte, chunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := send(buf[:n]); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

const chunkSize = apiwire.StreamChunkBytes

// tarPipe runs write in a goroutine and returns the reading end of its
// output; a write error reaches the reader.
func tarPipe(write func(io.Writer) error) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	return pr
}
