// Package controller is boxd-controller's logic: it places each Sandbox
// resource on a node (best of K by what the nodes' BoxdNode report),
// creates it on that node's boxd, keeps its status (node, boxd id, phase)
// current, and deletes it on the node before the resource goes (a
// finalizer). Its state is the API server's and the nodes': a restarted
// controller picks up where it was.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/internal/fleet/nodes"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Finalizer holds a Sandbox resource until its sandbox is gone from its node.
const Finalizer = "boxd.dev/sandbox"

// LabelUID labels the node's sandbox with its resource's UID.
const LabelUID = "boxd.dev/uid"

// Options tune the controller.
type Options struct {
	// NodeTimeout is how long a node may go without reporting before its
	// sandboxes are Lost.
	NodeTimeout time.Duration
	// Resync is how often a sandbox is checked on its node.
	Resync time.Duration
	// K is how many nodes placement samples.
	K int
	// Gateway is the address clients reach sandboxes at (status.address).
	Gateway string
}

// SandboxReconciler reconciles Sandbox resources.
type SandboxReconciler struct {
	client.Client
	Nodes  *nodes.Pool
	Opts   Options
	placer *placer
}

// Setup registers the reconciler with mgr.
func Setup(mgr ctrl.Manager, pool *nodes.Pool, opts Options) error {
	if opts.K < 1 {
		opts.K = 2
	}
	r := &SandboxReconciler{Client: mgr.GetClient(), Nodes: pool, Opts: opts, placer: newPlacer()}
	return ctrl.NewControllerManagedBy(mgr).For(&fleetv1.Sandbox{}).Named("sandbox").Complete(r)
}

// Reconcile brings one Sandbox and its node's sandbox into line.
func (r *SandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sb fleetv1.Sandbox
	if err := r.Get(ctx, req.NamespacedName, &sb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sb.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &sb)
	}
	if !controllerutil.ContainsFinalizer(&sb, Finalizer) {
		controllerutil.AddFinalizer(&sb, Finalizer)
		if err := r.Update(ctx, &sb); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch sb.Status.Phase {
	case fleetv1.PhaseGone, fleetv1.PhaseFailed:
		return ctrl.Result{}, nil // final: the sandbox is not made again
	}
	if sb.Status.BoxdID == "" {
		return r.create(ctx, &sb)
	}
	return r.check(ctx, &sb)
}

// finalize deletes the sandbox on its node, then lets the resource go.
func (r *SandboxReconciler) finalize(ctx context.Context, sb *fleetv1.Sandbox) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sb, Finalizer) {
		return ctrl.Result{}, nil
	}
	if sb.Status.Node != "" {
		node, err := r.node(ctx, sb.Status.Node)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if err == nil {
			// By name when there is no id yet: a sandbox created just
			// before a crash. Background: the sandbox is no one's at
			// once, its processes get their grace period after.
			id := sb.Status.BoxdID
			if id == "" {
				id = nodeName(sb)
			}
			_, err = r.Nodes.Sandboxes(node.Spec.Address).DeleteSandbox(ctx,
				nodes.Request(&boxdv1.DeleteSandboxRequest{Id: id, Background: true}, sb.Spec.Owner))
			if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
				return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
					s.Reason, s.Message = "DeleteFailed", fmt.Sprintf("delete on node %s: %v", sb.Status.Node, err)
				}, r.Opts.Resync)
			}
		}
	}
	controllerutil.RemoveFinalizer(sb, Finalizer)
	return ctrl.Result{}, r.Update(ctx, sb)
}

// nodeName is the sandbox's name on its node: unique per resource, so a
// create retried after a crash finds the first.
func nodeName(sb *fleetv1.Sandbox) string { return "k8s-" + string(sb.UID) }

func (r *SandboxReconciler) node(ctx context.Context, name string) (*fleetv1.BoxdNode, error) {
	var n fleetv1.BoxdNode
	err := r.Get(ctx, types.NamespacedName{Name: name}, &n)
	return &n, err
}

// fresh says whether n reported within the node timeout.
func (r *SandboxReconciler) fresh(n *fleetv1.BoxdNode) bool {
	return time.Since(n.Status.HeartbeatTime.Time) <= r.Opts.NodeTimeout
}

// setStatus applies change to sb's status and writes it; after says when
// to look again (0: not by time).
func (r *SandboxReconciler) setStatus(ctx context.Context, sb *fleetv1.Sandbox, change func(*fleetv1.SandboxStatus), after time.Duration) (ctrl.Result, error) {
	before := *sb.Status.DeepCopy()
	change(&sb.Status)
	if !statusEqual(before, sb.Status) {
		if err := r.Status().Update(ctx, sb); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func statusEqual(a, b fleetv1.SandboxStatus) bool {
	return a.Phase == b.Phase && a.Node == b.Node && a.BoxdID == b.BoxdID && a.Reason == b.Reason &&
		a.Message == b.Message && a.Address == b.Address
}

var errNoNode = errors.New("no node has reported within the node timeout")
