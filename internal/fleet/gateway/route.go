//go:build linux

package gateway

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	_ "github.com/boxd-dev/boxd/rpc/gen/boxd/v1" // registers the API's descriptors
)

// sandboxOf reads the call's first message (the whole body of a unary
// Connect call, the first enveloped message of a stream or a gRPC call)
// and finds the sandbox it names. It returns the bytes it read, to be
// sent on ahead of the rest of the body.
func sandboxOf(r *http.Request) ([]byte, string, error) {
	md, err := methodOf(r.URL.Path)
	if err != nil {
		return nil, "", err
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return nil, "", connect.NewError(connect.CodeUnimplemented, fmt.Errorf("the gateway reads requests uncompressed, not %s", enc))
	}
	ct := r.Header.Get("Content-Type")
	var raw, payload []byte
	switch {
	case apiwire.IsStream(ct):
		raw, payload, err = readEnvelope(r.Body)
	case ct == "application/proto" || ct == "application/json":
		raw, err = io.ReadAll(io.LimitReader(r.Body, apiwire.MaxMessageBytes+1))
		payload = raw
		if len(raw) > apiwire.MaxMessageBytes {
			err = errors.New("message larger than the API's limit")
		}
	default:
		return nil, "", connect.NewError(connect.CodeUnimplemented, fmt.Errorf("content type %q: the gateway speaks Connect and gRPC", ct))
	}
	if err != nil {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("read the request: %w", err))
	}
	msg := dynamicpb.NewMessage(md.Input())
	if strings.HasSuffix(ct, "json") {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(payload, msg)
	} else {
		err = proto.Unmarshal(payload, msg)
	}
	if err != nil {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("decode %s: %w", md.Input().FullName(), err))
	}
	id := findID(msg, 0)
	if id == "" {
		return nil, "", connect.NewError(connect.CodeUnimplemented,
			fmt.Errorf("%s names no sandbox: the gateway routes calls on a sandbox; create and list sandboxes as Sandbox resources (kubectl get sandboxes)", md.Name()))
	}
	return raw, id, nil
}

// methodOf finds the method of a path /PACKAGE.SERVICE/METHOD.
func methodOf(path string) (protoreflect.MethodDescriptor, error) {
	svc, m, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	notFound := connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s: no such procedure", path))
	if !ok {
		return nil, notFound
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, notFound
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, notFound
	}
	md := sd.Methods().ByName(protoreflect.Name(m))
	if md == nil {
		return nil, notFound
	}
	return md, nil
}

// readEnvelope reads one message envelope: a flags byte, a big-endian
// length, the message.
func readEnvelope(body io.Reader) (raw, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(body, hdr[:]); err != nil {
		return nil, nil, err
	}
	if hdr[0]&1 != 0 {
		return nil, nil, errors.New("a compressed first message: the gateway reads requests uncompressed")
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > apiwire.MaxMessageBytes {
		return nil, nil, errors.New("message larger than the API's limit")
	}
	raw = make([]byte, 5+n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(body, raw[5:]); err != nil {
		return nil, nil, err
	}
	return raw, raw[5:], nil
}

// findID finds the sandbox a request names: a field sandbox_id at any
// depth (an exec's start message nests it), else a top-level id (the
// SandboxService calls on one sandbox).
func findID(m protoreflect.Message, depth int) string {
	var id, nested string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Name() == "sandbox_id" && fd.Kind() == protoreflect.StringKind && !fd.IsList():
			id = v.String()
			return false
		case depth == 0 && fd.Name() == "id" && fd.Kind() == protoreflect.StringKind && !fd.IsList():
			id = v.String()
		case fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() && depth < 3 && nested == "":
			nested = findID(v.Message(), depth+1)
		}
		return true
	})
	if id != "" {
		return id
	}
	return nested
}
