// The code generated from rpc/proto (scripts/generate.sh), a module of its
// own so that a program importing the API's types, or the Go SDK, gets
// connect and protobuf and nothing of the daemon's dependencies.
module github.com/boxd-dev/boxd/rpc/gen

go 1.26.0

require (
	connectrpc.com/connect v1.19.1
	google.golang.org/protobuf v1.36.12
)
