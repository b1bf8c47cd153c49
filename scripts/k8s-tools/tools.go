//go:build tools

// Package tools pins the Kubernetes programs scripts/k8s-bins.sh builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
