package apiwire

import (
	"context"
	"io"
	"net/http"

	"connectrpc.com/connect"
)

// uploadWarmer makes every client-streaming call (an upload: WriteFile,
// UploadFiles, CopyIn, ImportImage) wait for one small request on the
// connection first. Go's HTTP/2 client sizes a request body's frames when
// the request starts; on a fresh connection that is before boxd's settings
// have been read, so the whole upload would go in the spec's 16 KiB frames
// (6,400 writes per 100 MiB, and twice as many reads in boxd) instead of
// boxd's 1 MiB. A finished request proves the settings were read, since
// they precede its answer on the connection. It costs one round trip
// (~0.3 ms) per upload; calls of other kinds are left alone, an exec's
// latency matters more than its frame size.
type uploadWarmer struct{ hc *http.Client }

func (w uploadWarmer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (w uploadWarmer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func (w uploadWarmer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		if spec.StreamType == connect.StreamTypeClient {
			w.warm(ctx)
		}
		return next(ctx, spec)
	}
}

// warm sends a bodiless request that boxd answers at once (404: no such
// procedure). Its errors do not matter: the call that follows reports the
// connection's.
func (w uploadWarmer) warm(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, BaseURL+"/", nil)
	if err != nil {
		return
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}
