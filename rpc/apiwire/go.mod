// How boxd's API travels, at both ends (see package apiwire): a module of its
// own so the Go SDK can use it without the daemon's dependencies.
module github.com/boxd-dev/boxd/rpc/apiwire

go 1.26.0

require (
	connectrpc.com/connect v1.19.1
	github.com/boxd-dev/boxd/rpc/gen v0.0.0-00010101000000-000000000000
	google.golang.org/protobuf v1.36.12
)

// In the repository, the generated code beside it.
replace github.com/boxd-dev/boxd/rpc/gen => ../gen
