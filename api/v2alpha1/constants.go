package v2alpha1

// This file holds every name of the express-sequencer contract: labels,
// annotations, the gate, the condition and its reasons. The Express operator,
// the tenant chart and kubectl-express all refer to these names, so they are
// kept in one place and never spelled out elsewhere.

// Kinds of Express nodes.
const (
	// KindBackend is the kind of a tenant's backend node (node key "be").
	KindBackend = "Backend"
	// KindFrontend is the kind of a tenant's frontend nodes (keys "fe1"…"feN").
	KindFrontend = "Frontend"
)

// Pod labels the Express operator puts on every pod of a node.
const (
	// LabelNode names the Backend/Frontend a pod belongs to.
	LabelNode = "express.medallia.com/node"
	// LabelExpressVersion is the Express version the pod runs.
	LabelExpressVersion = "express.medallia.com/express-version"
	// LabelDeploymentRevision is the deployment revision the pod runs.
	LabelDeploymentRevision = "express.medallia.com/deployment-revision"
)

// Annotations on Backend/Frontend.
const (
	// AnnotationDefaultedPrerequisites records which prerequisite lists the
	// admission webhook injected, and with which nodes, as JSON such as
	// {"provisioningPrerequisites":["acme-be"],"upgradePrerequisites":["acme-fe2"]}.
	// A list recorded here and still equal to what was injected is refreshed
	// when the operator's default order changes; any other list is the user's
	// and is never touched.
	AnnotationDefaultedPrerequisites = "express.medallia.com/defaulted-prerequisites"

	// AnnotationTargetChangedAt is when the admission webhook last gated the
	// node for a new rollout target (RFC 3339, UTC). The sequencer releases
	// no node of a tenant until the tenant's latest change is older than the
	// settle time, so that a change applied to many nodes one after the
	// other (Helm, Argo CD) is ordered as one rollout.
	AnnotationTargetChangedAt = "express.medallia.com/target-changed-at"

	// AnnotationPauseRollout set to "true" holds the node (and so every node
	// after it) until it is removed.
	AnnotationPauseRollout = "express.medallia.com/pause-rollout"

	// AnnotationIgnorePrerequisites set to "true" releases the node whatever
	// the state of its prerequisites: the escape hatch for an operator on call.
	AnnotationIgnorePrerequisites = "express.medallia.com/ignore-prerequisites"
)

// GateSequencer is the rollout gate owned by express-sequencer. The admission
// webhook adds it when a node's rollout target changes; the sequencer removes
// it once the node's prerequisites hold.
const GateSequencer = "express.medallia.com/sequencer"

// FieldManager is the field manager express-sequencer writes with.
const FieldManager = "express-sequencer"

// ConditionPrerequisitesReady is the one status condition express-sequencer
// owns. True: the node is free to roll out; False: it is held, the reason
// and message say why and for whom.
const ConditionPrerequisitesReady = "PrerequisitesReady"

// Reasons of the PrerequisitesReady condition, also used as Event reasons.
const (
	// ReasonReleased: the node's prerequisites hold and its gate was removed.
	ReasonReleased = "Released"
	// ReasonRolloutComplete: the node is Ready and on its target.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonNodeDown: the node is intentionally down (up: false); nothing to order.
	ReasonNodeDown = "NodeDown"
	// ReasonPrerequisitesIgnored: released by the ignore-prerequisites annotation.
	ReasonPrerequisitesIgnored = "PrerequisitesIgnored"
	// ReasonWaitingForPrerequisite: a prerequisite is not Ready or not on target.
	ReasonWaitingForPrerequisite = "WaitingForPrerequisite"
	// ReasonPrerequisiteNotFound: an explicit prerequisite, or the tenant's
	// Backend, does not exist.
	ReasonPrerequisiteNotFound = "PrerequisiteNotFound"
	// ReasonSettling: the prerequisites hold, but another node of the tenant
	// changed target less than the settle time ago: more of one change may
	// still be landing.
	ReasonSettling = "Settling"
	// ReasonRolloutPaused: held by the pause-rollout annotation, on this node
	// or on a prerequisite.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonDependencyCycle: the node waits, directly or through others, for
	// itself.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonProgressDeadlineExceeded: the node was released but did not become
	// Ready on its target within the progress deadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)
