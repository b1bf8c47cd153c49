//go:build linux

package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestPlacement places a burst against BoxdNodes in a real API server:
// three nodes reporting equal free memory get equal shares (the
// controller counts its own placements until a node reports again), and
// a node that stopped reporting gets none.
func TestPlacement(t *testing.T) {
	bin, err := testenv.KubeBinaries()
	if err != nil {
		t.Fatal(err)
	}
	k, err := testenv.StartKube(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	if _, err := k.Kubectl("apply", "-f", filepath.Join(testenv.RepoRoot(), "deploy", "kubernetes", "crds")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Kubectl("wait", "--for", "condition=established", "--timeout", "30s", "crd", "--all"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := fleetv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, age := range []time.Duration{0, 0, 0, time.Minute} {
		n := &fleetv1.BoxdNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}, Spec: fleetv1.BoxdNodeSpec{Address: "127.0.0.1:1"}}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		n.Status = fleetv1.BoxdNodeStatus{HeartbeatTime: metav1.NewTime(time.Now().Add(-age)), FreeMemoryBytes: 8 << 30, MemoryBytes: 16 << 30}
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	r := &SandboxReconciler{Client: c, Opts: Options{NodeTimeout: 15 * time.Second, K: 3}, placer: newPlacer()}
	got := map[string]int{}
	for range 30 {
		name, err := r.place(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[name]++
	}
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		if got[n] != 10 {
			t.Errorf("placements %v: want 10 on each reporting node", got)
			break
		}
	}
	if got["node-3"] != 0 {
		t.Errorf("a node that stopped reporting got %d placements", got["node-3"])
	}
}
