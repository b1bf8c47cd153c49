// Package reporter keeps a node's BoxdNode current: beside the node's
// boxd (in its DaemonSet pod), it reads the boxd over its Unix socket as
// root and writes what placement scores by (memory, sandboxes, pools,
// images) with a heartbeat. A node whose reports stop is one whose
// sandboxes the controller marks Lost.
package reporter

import (
	"bufio"
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Reporter writes one node's BoxdNode.
type Reporter struct {
	Client  client.Client
	Node    string // the BoxdNode's name (the Kubernetes node's)
	Address string // HOST:PORT of the boxd's TLS listener
	Socket  string // the boxd's Unix socket
	// Meminfo is /proc/meminfo (a test may point it elsewhere).
	Meminfo string
}

// Run reports every interval until ctx ends; a failed report is logged
// by logf and retried at the next tick (the controller sees the gap).
func (r *Reporter) Run(ctx context.Context, interval time.Duration, logf func(string, ...any)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := r.Report(ctx); err != nil {
			logf("report %s: %v", r.Node, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Report reads the boxd once and writes the BoxdNode (made if missing).
func (r *Reporter) Report(ctx context.Context) error {
	st, err := r.read(ctx)
	if err != nil {
		return err
	}
	var n fleetv1.BoxdNode
	err = r.Client.Get(ctx, types.NamespacedName{Name: r.Node}, &n)
	if apierrors.IsNotFound(err) {
		n = fleetv1.BoxdNode{ObjectMeta: metav1.ObjectMeta{Name: r.Node}, Spec: fleetv1.BoxdNodeSpec{Address: r.Address}}
		if err := r.Client.Create(ctx, &n); err != nil {
			return fmt.Errorf("create BoxdNode: %w", err)
		}
	} else if err != nil {
		return err
	}
	if n.Spec.Address != r.Address {
		n.Spec.Address = r.Address
		if err := r.Client.Update(ctx, &n); err != nil {
			return fmt.Errorf("update BoxdNode address: %w", err)
		}
	}
	n.Status = st
	return r.Client.Status().Update(ctx, &n)
}

// read asks the boxd for its state; a boxd that does not answer gives
// no report (and so no heartbeat).
func (r *Reporter) read(ctx context.Context) (fleetv1.BoxdNodeStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st := fleetv1.BoxdNodeStatus{HeartbeatTime: metav1.Now(), CPUs: int32(goruntime.NumCPU())}
	sbs, err := rpcclient.New(r.Socket).ListSandboxes(ctx, connect.NewRequest(&boxdv1.ListSandboxesRequest{All: true}))
	if err != nil {
		return st, fmt.Errorf("boxd at %s: %w", r.Socket, err)
	}
	st.Sandboxes = int32(len(sbs.Msg.GetSandboxes()))
	pools, err := rpcclient.NewPool(r.Socket).ListPools(ctx, connect.NewRequest(&boxdv1.ListPoolsRequest{}))
	if err != nil {
		return st, fmt.Errorf("boxd at %s: pools: %w", r.Socket, err)
	}
	for _, p := range pools.Msg.GetPools() {
		st.Pools = append(st.Pools, fleetv1.PoolState{Image: p.GetImage(), Size: p.GetSize(), Ready: p.GetReady()})
	}
	imgs, err := rpcclient.New(r.Socket).ListImages(ctx, connect.NewRequest(&boxdv1.ListImagesRequest{}))
	if err != nil {
		return st, fmt.Errorf("boxd at %s: images: %w", r.Socket, err)
	}
	for _, i := range imgs.Msg.GetImages() {
		st.Images = append(st.Images, i.GetName())
	}
	st.MemoryBytes, st.FreeMemoryBytes, err = memory(r.Meminfo)
	return st, err
}

// memory reads MemTotal and MemAvailable.
func memory(path string) (total, avail int64, err error) {
	if path == "" {
		path = "/proc/meminfo"
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "MemTotal":
			total = kb << 10
		case "MemAvailable":
			avail = kb << 10
		}
	}
	return total, avail, sc.Err()
}
