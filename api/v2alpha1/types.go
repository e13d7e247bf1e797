package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSpec is the spec shared by Backend and Frontend: one Express node of a
// tenant, its rollout target and the order in which it may be rolled out.
type NodeSpec struct {
	// ClusterConfig identifies the tenant the node belongs to. A tenant is the
	// namespace together with clusterConfig.clusterName.
	ClusterConfig ClusterConfig `json:"clusterConfig"`

	// Up is false when the node is intentionally down. Down nodes are skipped by
	// the rollout order and never gated.
	// +kubebuilder:default=true
	// +optional
	Up *bool `json:"up,omitempty"`

	// ExpressVersion is the Express release the node should run.
	// +optional
	ExpressVersion string `json:"expressVersion,omitempty"`

	// DeploymentRevision is the deployment revision the node should run.
	// +optional
	DeploymentRevision string `json:"deploymentRevision,omitempty"`

	// ConfigChangeset is the configuration changeset the node should run.
	// +optional
	ConfigChangeset string `json:"configChangeset,omitempty"`

	// DeploymentDependencies lists the nodes this node waits for. A list that is
	// absent gets the operator's default order injected by the admission
	// webhook; an explicit empty list means "no prerequisites".
	// +optional
	DeploymentDependencies *DeploymentDependencies `json:"deploymentDependencies,omitempty"`

	// RolloutGates hold the node: while any gate is present the Express
	// operator must not roll out or (re)provision it.
	// +listType=map
	// +listMapKey=name
	// +optional
	RolloutGates []RolloutGate `json:"rolloutGates,omitempty"`
}

// ClusterConfig identifies the tenant a node belongs to.
type ClusterConfig struct {
	// ClusterName is the tenant's cluster name; node CRs are named
	// <clusterName>-<nodeKey>.
	// +kubebuilder:validation:MinLength=1
	ClusterName string `json:"clusterName"`

	// TenantID is the tenant's numeric identifier.
	// +optional
	TenantID string `json:"tenantID,omitempty"`

	// TenantName is the tenant's display name.
	// +optional
	TenantName string `json:"tenantName,omitempty"`
}

// DeploymentDependencies are the prerequisites of a node. Each list keeps the
// difference between absent (nil: use the operator's default) and empty
// (no prerequisites) through a round trip to the API server.
type DeploymentDependencies struct {
	// ProvisioningPrerequisites must be Ready before this node is provisioned
	// or recovered. At most 1,000: a tenant's other nodes.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	ProvisioningPrerequisites []Prerequisite `json:"provisioningPrerequisites,omitzero"`

	// UpgradePrerequisites must be Ready and on their target before this node
	// is upgraded. At most 1,000: a tenant's other nodes.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	UpgradePrerequisites []Prerequisite `json:"upgradePrerequisites,omitzero"`
}

// Prerequisite names a node of the same tenant and the state it must be in.
type Prerequisite struct {
	// ExpressNode is the name of the Backend or Frontend, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	ExpressNode string `json:"expressNode"`

	// Kind is the kind of the named node.
	// +kubebuilder:validation:Enum=Backend;Frontend
	Kind string `json:"kind"`

	// ExpressVersion, when set, pins the version the prerequisite must run;
	// empty means the prerequisite's own target.
	// +optional
	ExpressVersion string `json:"expressVersion,omitempty"`

	// DeploymentRevision, when set, pins the revision the prerequisite must
	// run; empty means the prerequisite's own target.
	// +optional
	DeploymentRevision string `json:"deploymentRevision,omitempty"`

	// PodConditionType is the pod condition every pod of the prerequisite must
	// have.
	// +kubebuilder:default=Ready
	// +optional
	PodConditionType string `json:"podConditionType,omitempty"`

	// ConditionStatus is the status that condition must have.
	// +kubebuilder:default="True"
	// +optional
	ConditionStatus string `json:"conditionStatus,omitempty"`
}

// RolloutGate is one reason to hold a node's rollout.
type RolloutGate struct {
	// Name identifies who holds the gate, e.g. express.medallia.com/sequencer.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// NodeStatus is the status shared by Backend and Frontend. Its conditions are
// shared with the Express operator; express-sequencer writes only the
// PrerequisitesReady condition.
type NodeStatus struct {
	// Conditions of the node.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Backend is the backend node of an Express tenant.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=be,categories=express
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.expressVersion`
// +kubebuilder:printcolumn:name="Up",type=boolean,JSONPath=`.spec.up`
// +kubebuilder:printcolumn:name="Gated",type=string,JSONPath=`.spec.rolloutGates[*].name`
// +kubebuilder:printcolumn:name="Prerequisites",type=string,JSONPath=`.status.conditions[?(@.type=="PrerequisitesReady")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Backend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeSpec   `json:"spec,omitempty"`
	Status NodeStatus `json:"status,omitempty"`
}

// BackendList is a list of Backends.
//
// +kubebuilder:object:root=true
type BackendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backend `json:"items"`
}

// Frontend is one frontend node of an Express tenant.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fe,categories=express
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.expressVersion`
// +kubebuilder:printcolumn:name="Up",type=boolean,JSONPath=`.spec.up`
// +kubebuilder:printcolumn:name="Gated",type=string,JSONPath=`.spec.rolloutGates[*].name`
// +kubebuilder:printcolumn:name="Prerequisites",type=string,JSONPath=`.status.conditions[?(@.type=="PrerequisitesReady")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Frontend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeSpec   `json:"spec,omitempty"`
	Status NodeStatus `json:"status,omitempty"`
}

// FrontendList is a list of Frontends.
//
// +kubebuilder:object:root=true
type FrontendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Frontend `json:"items"`
}
