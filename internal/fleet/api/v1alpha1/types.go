// Package v1alpha1 is the boxd.dev/v1alpha1 API group: the Kubernetes
// resources of a boxd fleet. They are shaped after kubernetes-sigs'
// agent-sandbox (SandboxTemplate, SandboxPool, Sandbox, SandboxClaim) so its
// users feel at home, plus BoxdNode, the resource each node's boxd keeps
// current and the controller places sandboxes by.
// +kubebuilder:object:generate=true
// +groupName=boxd.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of every kind here.
var GroupVersion = schema.GroupVersion{Group: "boxd.dev", Version: "v1alpha1"}

// AddToScheme registers the kinds with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&SandboxTemplate{}, &SandboxTemplateList{},
		&SandboxPool{}, &SandboxPoolList{},
		&Sandbox{}, &SandboxList{},
		&SandboxClaim{}, &SandboxClaimList{},
		&BoxdNode{}, &BoxdNodeList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// SandboxSpecTemplate is what a sandbox is made of: the fields of boxd's
// CreateSandbox a fleet user sets.
type SandboxSpecTemplate struct {
	Image   string `json:"image,omitempty"`
	Runtime string `json:"runtime,omitempty"` // runc (default) or gvisor
	// Memory limit, e.g. "256m"; CPUs in cores, e.g. "1.5"; Disk cap, e.g. "2g".
	Memory string   `json:"memory,omitempty"`
	CPUs   string   `json:"cpus,omitempty"`
	Disk   string   `json:"disk,omitempty"`
	Env    []string `json:"env,omitempty"`
	// Network is "none" (default) or "egress", Allow what egress may reach.
	Network string   `json:"network,omitempty"`
	Allow   []string `json:"allow,omitempty"`
	// TTL and IdleTimeout are Go durations, e.g. "1h".
	TTL         string `json:"ttl,omitempty"`
	IdleTimeout string `json:"idleTimeout,omitempty"`
}

// SandboxTemplate is a named SandboxSpecTemplate sandboxes and pools refer to.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=sbt
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxSpecTemplate `json:"spec,omitempty"`
}

// SandboxTemplateList is a list of SandboxTemplates.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

// SandboxPoolSpec keeps warm sandboxes of a template on the nodes.
type SandboxPoolSpec struct {
	TemplateRef string `json:"templateRef"`
	SizePerNode int32  `json:"sizePerNode,omitempty"`
	MinSize     int32  `json:"minSize,omitempty"`
	MaxSize     int32  `json:"maxSize,omitempty"`
}

// SandboxPoolStatus counts the warm members the nodes report.
type SandboxPoolStatus struct {
	Ready int32 `json:"ready,omitempty"`
}

// SandboxPool is a warm pool of one template across the fleet.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type SandboxPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxPoolSpec   `json:"spec,omitempty"`
	Status            SandboxPoolStatus `json:"status,omitempty"`
}

// SandboxPoolList is a list of SandboxPools.
// +kubebuilder:object:root=true
type SandboxPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxPool `json:"items"`
}

// SandboxSpec asks for one sandbox.
type SandboxSpec struct {
	// Owner is the user (a uid, or a name every node knows) the sandbox
	// belongs to on its node: who may reach it through the gateway.
	Owner string `json:"owner"`
	// TemplateRef names a SandboxTemplate of the namespace; Template, if
	// set, is used instead.
	TemplateRef string               `json:"templateRef,omitempty"`
	Template    *SandboxSpecTemplate `json:"template,omitempty"`
	// NodeName pins the sandbox to one BoxdNode; empty: the controller
	// places it.
	NodeName string `json:"nodeName,omitempty"`
}

// The phases of a Sandbox.
const (
	PhasePending = "Pending" // not placed or not yet created on its node
	PhaseRunning = "Running" // created on its node
	PhaseGone    = "Gone"    // deleted on its node (TTL, idle policy, by hand)
	PhaseLost    = "Lost"    // its node's boxd stopped reporting
	PhaseFailed  = "Failed"  // its node refused it
)

// SandboxStatus is where the sandbox is and how it is.
type SandboxStatus struct {
	Phase   string `json:"phase,omitempty"`
	Node    string `json:"node,omitempty"`
	BoxdID  string `json:"boxdID,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Address is where clients reach it: the gateway's, with BoxdID.
	Address    string             `json:"address,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Sandbox is one boxd sandbox on one node of the fleet.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sb
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Boxd ID",type=string,JSONPath=`.status.boxdID`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxSpec   `json:"spec,omitempty"`
	Status            SandboxStatus `json:"status,omitempty"`
}

// SandboxList is a list of Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

// SandboxClaimSpec takes a warm member of a pool.
type SandboxClaimSpec struct {
	PoolRef string `json:"poolRef"`
	Owner   string `json:"owner"`
}

// SandboxClaimStatus says which sandbox the claim got.
type SandboxClaimStatus struct {
	Phase  string `json:"phase,omitempty"`
	Node   string `json:"node,omitempty"`
	BoxdID string `json:"boxdID,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// SandboxClaim is a request for a warm member of a SandboxPool.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type SandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              SandboxClaimSpec   `json:"spec,omitempty"`
	Status            SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxClaimList is a list of SandboxClaims.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

// BoxdNodeSpec says how the control plane reaches a node's boxd.
type BoxdNodeSpec struct {
	// Address is HOST:PORT of the node's boxd TLS listener (--listen).
	Address string `json:"address"`
}

// PoolState is one warm pool of a node.
type PoolState struct {
	Image string `json:"image"`
	Size  int32  `json:"size"`
	Ready int32  `json:"ready"`
}

// BoxdNodeStatus is what the node's boxd reports, refreshed every few
// seconds (HeartbeatTime says when last).
type BoxdNodeStatus struct {
	HeartbeatTime   metav1.Time `json:"heartbeatTime,omitempty"`
	MemoryBytes     int64       `json:"memoryBytes,omitempty"`
	FreeMemoryBytes int64       `json:"freeMemoryBytes,omitempty"`
	CPUs            int32       `json:"cpus,omitempty"`
	Sandboxes       int32       `json:"sandboxes,omitempty"`
	Pools           []PoolState `json:"pools,omitempty"`
	Images          []string    `json:"images,omitempty"`
}

// BoxdNode is one node's boxd (cluster-scoped; named after the node).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Sandboxes",type=integer,JSONPath=`.status.sandboxes`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.heartbeatTime`
type BoxdNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              BoxdNodeSpec   `json:"spec,omitempty"`
	Status            BoxdNodeStatus `json:"status,omitempty"`
}

// BoxdNodeList is a list of BoxdNodes.
// +kubebuilder:object:root=true
type BoxdNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BoxdNode `json:"items"`
}
