//go:build linux

// Package fleet holds the tests of the fleet's Kubernetes manifests; the
// fleet's code is in its subpackages.
package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestDeployDryRun applies deploy/kubernetes with kubectl apply -k and a
// server-side dry run against a real API server: every object of the
// base must be one the server accepts (the namespace is made first, as a
// dry run does not make it). A copy with an unknown field in the
// DaemonSet must be refused, so the check is real.
func TestDeployDryRun(t *testing.T) {
	bin, err := testenv.KubeBinaries()
	if err != nil {
		t.Fatal(err)
	}
	k, err := testenv.StartKube(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	if _, err := k.Kubectl("create", "namespace", "boxd-system"); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(testenv.RepoRoot(), "deploy", "kubernetes")
	out, err := k.Kubectl("apply", "-k", base, "--dry-run=server")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"daemonset.apps/boxd-node", "deployment.apps/boxd-controller", "deployment.apps/boxd-gateway",
		"service/boxd-gateway", "customresourcedefinition.apiextensions.k8s.io/sandboxes.boxd.dev",
		"customresourcedefinition.apiextensions.k8s.io/boxdnodes.boxd.dev", "clusterrole.rbac.authorization.k8s.io/boxd-controller"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run did not name %s:\n%s", want, out)
		}
	}

	// An overlay with a field no DaemonSet has.
	bad := t.TempDir()
	rel, err := filepath.Rel(bad, base)
	if err != nil {
		t.Fatal(err)
	}
	kust := "resources: [" + rel + "]\npatches:\n  - target: {kind: DaemonSet, name: boxd-node}\n    patch: |-\n      - op: add\n        path: /spec/template/spec/containers/0/privilegd\n        value: true\n"
	if err := os.WriteFile(filepath.Join(bad, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := k.Kubectl("apply", "-k", bad, "--dry-run=server"); err == nil || !strings.Contains(out, "privilegd") {
		t.Errorf("a DaemonSet with an unknown field passed the dry run: %v\n%s", err, out)
	}
}
