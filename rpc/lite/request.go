//go:build linux

package lite

import "strconv"

// Path is ExecStream's route, Connect's "/package.Service/Method".
const Path = "/boxd.v1.SandboxService/ExecStream"

// AppendHTTPRequest appends the whole HTTP/1.1 request for req to b: headers
// and one Connect envelope (flags 0, big-endian length) holding req as
// protobuf JSON. Strings must be valid UTF-8 (protobuf refuses others).
func AppendHTTPRequest(b []byte, req *ExecRequest) []byte {
	body := AppendRequestJSON(make([]byte, 5, 256), req)
	n := len(body) - 5
	body[1], body[2], body[3], body[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	b = append(b, "POST "+Path+" HTTP/1.1\r\n"+
		"Host: boxd\r\n"+
		"Content-Type: application/connect+json\r\n"+
		"Connect-Protocol-Version: 1\r\n"+
		"Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// AppendRequestJSON appends req as protobuf JSON (proto3 JSON names; empty
// fields left out, as protojson does).
func AppendRequestJSON(b []byte, req *ExecRequest) []byte {
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	str := func(name, v string) {
		if v != "" {
			field(name)
			b = appendJSONString(b, v)
		}
	}
	list := func(name string, vs []string) {
		if len(vs) == 0 {
			return
		}
		field(name)
		b = append(b, '[')
		for i, v := range vs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	str("sandboxId", req.SandboxID)
	list("args", req.Args)
	list("env", req.Env)
	str("workdir", req.Workdir)
	str("timeout", req.Timeout)
	return append(b, '}')
}

// appendJSONString quotes s for JSON: quote, backslash and control
// characters escaped, everything else (valid UTF-8) as is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
