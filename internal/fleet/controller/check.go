package controller

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/internal/fleet/nodes"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// check looks at a created sandbox: Lost while its node does not report,
// Gone once its node no longer has it, Running otherwise.
func (r *SandboxReconciler) check(ctx context.Context, sb *fleetv1.Sandbox) (ctrl.Result, error) {
	node, err := r.node(ctx, sb.Status.Node)
	if apierrors.IsNotFound(err) {
		return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Phase, s.Reason, s.Message = fleetv1.PhaseLost, "NodeRemoved", fmt.Sprintf("BoxdNode %s no longer exists", sb.Status.Node)
		}, r.Opts.Resync)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !r.fresh(node) {
		return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Phase, s.Reason = fleetv1.PhaseLost, "NodeNotReporting"
			s.Message = fmt.Sprintf("node %s's boxd last reported at %s (timeout %s)", node.Name,
				node.Status.HeartbeatTime.UTC().Format("15:04:05"), r.Opts.NodeTimeout)
		}, r.Opts.Resync)
	}
	_, err = r.Nodes.Sandboxes(node.Spec.Address).GetSandbox(ctx,
		nodes.Request(&boxdv1.GetSandboxRequest{Id: sb.Status.BoxdID}, sb.Spec.Owner))
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound:
		return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Phase, s.Reason = fleetv1.PhaseGone, "DeletedOnNode"
			s.Message = fmt.Sprintf("node %s no longer has sandbox %s (expired, idle policy or deleted there)", node.Name, sb.Status.BoxdID)
		}, 0)
	case err != nil:
		return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Phase, s.Reason, s.Message = fleetv1.PhaseLost, "NodeUnreachable", err.Error()
		}, r.Opts.Resync)
	}
	return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
		s.Phase, s.Reason, s.Message = fleetv1.PhaseRunning, "Created", ""
	}, r.Opts.Resync)
}
