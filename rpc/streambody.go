package rpc

import (
	"net/http"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// bufferStreams makes h read streamed requests (uploads above all) in big
// pieces, so that Go's HTTP/2 server gives the window back to the client
// once per piece rather than once per message (apiwire.NewStreamBody says
// why that matters). Unary requests are left as they are.
func bufferStreams(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || !apiwire.IsStream(r.Header.Get("Content-Type")) {
			h.ServeHTTP(w, r)
			return
		}
		body := apiwire.NewStreamBody(r.Body)
		defer body.Close()
		r2 := *r
		r2.Body = body
		h.ServeHTTP(w, &r2)
	})
}
