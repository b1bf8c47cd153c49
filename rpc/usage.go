package rpc

import (
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

// usage is what a finished command used, from its result. The numbers
// come from the sandbox: negative ones are shown as 0.
func usage(r runtime.ExecResult) *boxdv1.ResourceUsage {
	wall := int64(0)
	if !r.Started.IsZero() && r.Ended.After(r.Started) {
		wall = r.Ended.Sub(r.Started).Microseconds()
	}
	return &boxdv1.ResourceUsage{
		UserCpuUsec:     max(r.UserCPU.Microseconds(), 0),
		SystemCpuUsec:   max(r.SystemCPU.Microseconds(), 0),
		PeakMemoryBytes: max(r.MaxRSS, 0),
		ReadBytes:       max(r.ReadBytes, 0),
		WriteBytes:      max(r.WriteBytes, 0),
		WallUsec:        wall,
	}
}
