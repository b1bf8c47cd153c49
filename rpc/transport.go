package rpc

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// DefaultSocket is where boxd listens unless told otherwise.
const DefaultSocket = apiwire.DefaultSocket

// MaxMessageBytes bounds any single message either side accepts.
const MaxMessageBytes = apiwire.MaxMessageBytes

// Listen creates the Unix socket at path with mode 0660. A directory it has
// to create is made 0750; an existing directory is left as it is (it may be
// /tmp). When gid >= 0 the socket, and a directory it created, belong to
// that group so its members can call boxd. A stale socket from a dead boxd
// is replaced.
func Listen(path string, gid int) (net.Listener, error) {
	dir := filepath.Dir(path)
	created := false
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("socket dir %s: %w", dir, err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			return nil, fmt.Errorf("socket dir %s: %w", dir, err)
		}
		created = true
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("socket %s: another boxd is already listening", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if gid >= 0 {
		owned := []string{path}
		if created {
			owned = append(owned, dir)
		}
		for _, p := range owned {
			if err := os.Chown(p, 0, gid); err != nil {
				ln.Close()
				return nil, fmt.Errorf("chown %s to group %s: %w", p, strconv.Itoa(gid), err)
			}
		}
	}
	return ln, nil
}

// serverHTTP2 is the server's half of apiwire.Transport's settings: windows
// that let a client stream a file in without stalling on window updates
// (the 1 MiB default stops the sender every megabyte until the handler
// has caught up), and frames as large as the client's.
func serverHTTP2() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxReadFrameSize:              apiwire.MaxFrameBytes,
		MaxReceiveBufferPerStream:     apiwire.StreamWindowBytes,
		MaxReceiveBufferPerConnection: apiwire.ConnWindowBytes,
	}
}

// chunkCodec decodes file and tar data into pooled buffers; handlers that
// are done with a message's data hand it back with apiwire.RecycleChunk.
var chunkCodec = apiwire.ChunkCodec{}
