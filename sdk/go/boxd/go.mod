// The Go SDK: a module of its own, so a program that imports it gets
// connect, protobuf and boxd's API code (rpc/gen, rpc/apiwire) and none of
// the daemon's dependencies.
module github.com/boxd-dev/boxd/sdk/go/boxd

go 1.26.0

require (
	connectrpc.com/connect v1.19.1
	github.com/boxd-dev/boxd/rpc/apiwire v0.0.0-00010101000000-000000000000
	github.com/boxd-dev/boxd/rpc/gen v0.0.0-00010101000000-000000000000
)

require google.golang.org/protobuf v1.36.12 // indirect

// In this repository the SDK builds with the API code beside it. A program
// elsewhere gets these modules at the versions above, or replaces them
// with a checkout (sdk/go/README.md).
replace (
	github.com/boxd-dev/boxd/rpc/apiwire => ../../../rpc/apiwire
	github.com/boxd-dev/boxd/rpc/gen => ../../../rpc/gen
)
