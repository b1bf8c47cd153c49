package controller

import (
	"context"
	"fmt"
	"strconv"

	"connectrpc.com/connect"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/internal/fleet/nodes"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// create places sb (unless pinned or placed before a crash) and creates
// it on its node. The node is written to status first, so a controller
// that crashes between the two creates on the same node again, where the
// name finds the first.
func (r *SandboxReconciler) create(ctx context.Context, sb *fleetv1.Sandbox) (ctrl.Result, error) {
	tmpl, err := r.template(ctx, sb)
	if err != nil {
		return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Phase, s.Reason, s.Message = fleetv1.PhasePending, "TemplateNotFound", err.Error()
		}, r.Opts.Resync)
	}
	if sb.Status.Node == "" {
		name := sb.Spec.NodeName
		if name == "" {
			if name, err = r.place(ctx); err != nil {
				return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
					s.Phase, s.Reason, s.Message = fleetv1.PhasePending, "Unschedulable", err.Error()
				}, r.Opts.Resync)
			}
		}
		if _, err := r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Phase, s.Node, s.Reason, s.Message = fleetv1.PhasePending, name, "Placed", ""
		}, 0); err != nil {
			return ctrl.Result{}, err
		}
	}
	node, err := r.node(ctx, sb.Status.Node)
	if err != nil {
		return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Reason, s.Message = "NodeNotFound", err.Error()
		}, r.Opts.Resync)
	}
	id, err := r.createOn(ctx, node, sb, tmpl)
	if err != nil {
		if code := connect.CodeOf(err); code == connect.CodeInvalidArgument || code == connect.CodePermissionDenied {
			return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
				s.Phase, s.Reason, s.Message = fleetv1.PhaseFailed, "CreateRefused", err.Error()
			}, 0)
		}
		return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
			s.Reason, s.Message = "CreateFailed", err.Error()
		}, r.Opts.Resync)
	}
	return r.setStatus(ctx, sb, func(s *fleetv1.SandboxStatus) {
		s.Phase, s.BoxdID, s.Reason, s.Message = fleetv1.PhaseRunning, id, "Created", ""
		if r.Opts.Gateway != "" {
			s.Address = r.Opts.Gateway
		}
	}, r.Opts.Resync)
}

// createOn creates sb on node as its owner; a sandbox of its name there
// already (a create retried after a crash) is the one.
func (r *SandboxReconciler) createOn(ctx context.Context, node *fleetv1.BoxdNode, sb *fleetv1.Sandbox, t *fleetv1.SandboxSpecTemplate) (string, error) {
	api := r.Nodes.Sandboxes(node.Spec.Address)
	req, err := createRequest(sb, t)
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	resp, err := api.CreateSandbox(ctx, nodes.Request(req, sb.Spec.Owner))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		got, gerr := api.GetSandbox(ctx, nodes.Request(&boxdv1.GetSandboxRequest{Id: nodeName(sb)}, sb.Spec.Owner))
		if gerr != nil {
			return "", gerr
		}
		return got.Msg.GetSandbox().GetId(), nil
	}
	if err != nil {
		return "", fmt.Errorf("create on node %s: %w", node.Name, err)
	}
	return resp.Msg.GetSandbox().GetId(), nil
}

// createRequest is boxd's CreateSandbox for sb from template t.
func createRequest(sb *fleetv1.Sandbox, t *fleetv1.SandboxSpecTemplate) (*boxdv1.CreateSandboxRequest, error) {
	req := &boxdv1.CreateSandboxRequest{
		Image: t.Image, Env: t.Env, Name: nodeName(sb), Ttl: t.TTL, IdleTimeout: t.IdleTimeout, Runtime: t.Runtime,
		Labels: map[string]string{LabelUID: string(sb.UID), "boxd.dev/namespace": sb.Namespace, "boxd.dev/name": sb.Name},
		Limits: &boxdv1.Limits{Memory: t.Memory, Disk: t.Disk},
	}
	if t.CPUs != "" {
		c, err := strconv.ParseFloat(t.CPUs, 64)
		if err != nil {
			return nil, fmt.Errorf("template cpus: %q is not a number of cores", t.CPUs)
		}
		req.Limits.Cpus = c
	}
	if t.Network != "" || len(t.Allow) > 0 {
		req.Network = &boxdv1.NetworkRequest{Mode: t.Network, Allow: t.Allow}
	}
	return req, nil
}

// template is sb's inline template or the SandboxTemplate it names.
func (r *SandboxReconciler) template(ctx context.Context, sb *fleetv1.Sandbox) (*fleetv1.SandboxSpecTemplate, error) {
	if sb.Spec.Template != nil {
		return sb.Spec.Template, nil
	}
	if sb.Spec.TemplateRef == "" {
		return &fleetv1.SandboxSpecTemplate{}, nil
	}
	var t fleetv1.SandboxTemplate
	if err := r.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Spec.TemplateRef}, &t); err != nil {
		return nil, fmt.Errorf("templateRef %q: %w", sb.Spec.TemplateRef, err)
	}
	return &t.Spec, nil
}
