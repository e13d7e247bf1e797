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
	// LabelTargetHash is the rollout target a pod was created for: the
	// Express operator copies the node's AnnotationTargetHash onto every pod
	// it creates. A node is on target when every pod carries its hash.
	LabelTargetHash = "express.medallia.com/target-hash"
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

	// AnnotationTargetHash is the node's rollout target identity: a hash of
	// its whole spec as admitted (every field, including fields the Go types
	// do not model) minus deploymentDependencies, rolloutGates and up. The
	// admission webhook writes it on every admission, overwriting any value a
	// user wrote. The target changed exactly when the hash changed.
	AnnotationTargetHash = "express.medallia.com/target-hash"

	// AnnotationReleasedTarget is the target hash the sequencer last released
	// the node for, written in the same patch that removes the gate. A node
	// whose target hash differs has a new target (upgrade mode); one with
	// none was never released (first rollout). Only the sequencer changes it;
	// the webhook records the running target of a node that predates
	// express-sequencer (adoption).
	AnnotationReleasedTarget = "express.medallia.com/released-target"

	// AnnotationReleasedGeneration is the node's metadata.generation right
	// after that release, written in the same patch. A RolloutComplete
	// condition observed at or after it, or a dependent's released-after
	// record of it, proves the released rollout converged; until then the
	// rollout is in flight.
	AnnotationReleasedGeneration = "express.medallia.com/released-generation"

	// AnnotationReleasedAfter records, in the patch that releases a node,
	// the converged rollouts of the prerequisites its release relied on: a
	// JSON object from node name to "<uid>/<released-generation>". Once a
	// prerequisite's pods are gone (a crash right after), this record, like
	// the prerequisite's RolloutComplete condition written before the
	// release, says its rollout was done. A node whose release leaves its
	// operator nothing to roll (it runs its target Ready already, or its
	// target is the one released before and its workload was made for it)
	// names itself too, with the key of the release the patch makes.
	AnnotationReleasedAfter = "express.medallia.com/released-after"

	// AnnotationReleasedSetRevision records, in the patch that releases a
	// node, the StatefulSet its pods ran from at that moment:
	// "<uid>@<metadata.generation>/<status.currentRevision>", the
	// generation left out ("<uid>/…") unless the node's pods were all
	// Ready on the template's target hash and status.observedGeneration
	// had reached it (a sequencer of an earlier version wrote
	// "<uid>/<status.currentRevision>", and reads this as another
	// StatefulSet's). That StatefulSet's
	// currentRevision moving on since, to its updateRevision, on a template
	// carrying the node's target hash, is its controller's own record that
	// the released rollout converged: every replica updated and Ready at
	// once. Its generation unchanged, and the revision recorded its
	// updateRevision, say its template is what it was, rolled out whole,
	// at the release: pods made from it are a recovery of what the node ran.
	AnnotationReleasedSetRevision = "express.medallia.com/released-set-revision"

	// AnnotationReleasedAt is when the sequencer released the node for its
	// released-target (RFC 3339, UTC), written in the same patch: the start
	// of the rollout's rolling span in kubectl express history.
	AnnotationReleasedAt = "express.medallia.com/released-at"

	// AnnotationTargetRolloutID is the rollout-id the node carried when the
	// admission webhook last stamped a new target (or brought it back up):
	// the rollout its current target belongs to, whatever rollout-id later
	// renders put on it without changing its target. Only the webhook
	// writes it.
	AnnotationTargetRolloutID = "express.medallia.com/target-rollout-id"

	// AnnotationRolloutHistory keeps the node's last rollouts before its
	// current one, oldest first, as a JSON list of records (target, rollout
	// id, when it was gated, released, Ready on target and replaced, and
	// what its release relied on). The admission webhook appends the
	// current rollout's record when a new target replaces it (or the node
	// is brought back up), from what the stored node says at that moment —
	// no write of its own — and keeps the last RolloutHistoryLength; nobody
	// else changes it. It is what
	// kubectl express history answers from once the sequencer's Events have
	// expired.
	AnnotationRolloutHistory = "express.medallia.com/rollout-history"

	// AnnotationRolloutID groups a change applied node by node: the tenant
	// chart renders one value on every node of one render (a hash of the
	// values and of every node's rendered spec). While a tenant's live nodes
	// disagree on it, the change is still landing and no node is released.
	AnnotationRolloutID = "express.medallia.com/rollout-id"

	// AnnotationRolloutIDChangedAt is when the admission webhook last saw the
	// node's rollout-id change (RFC 3339, UTC): the start of a landing, for
	// the landing timeout.
	AnnotationRolloutIDChangedAt = "express.medallia.com/rollout-id-changed-at"

	// AnnotationExplicitPrerequisites marks prerequisite lists as the
	// user's, whatever they hold: "provisioningPrerequisites",
	// "upgradePrerequisites", both comma-separated, or "true" for both. A
	// list equal to what the webhook injected, written by Helm or by
	// server-side apply (which keep no last-applied-configuration on the
	// object), cannot be told from the injection itself: without the
	// marker a change of the default order would rewrite it.
	AnnotationExplicitPrerequisites = "express.medallia.com/explicit-prerequisites"

	// AnnotationRenderedNodes lists, comma-separated, the names of the
	// nodes a render of the tenant chart renders, on every node it renders
	// (beside AnnotationRolloutID). A node the newest render does not list
	// is not part of its landing: a node dropped from the values, which
	// Argo CD does not prune, holds no change of its tenant. Without it,
	// every node of the tenant is part of every landing.
	AnnotationRenderedNodes = "express.medallia.com/rendered-nodes"

	// AnnotationTargetChangedAt is when the admission webhook last gated the
	// node for a new rollout target (RFC 3339, UTC). Tenants without
	// rollout-id, and changes made without a new rollout-id (a node's latest
	// change, this or AnnotationOrderChangedAt, is not its
	// AnnotationRolloutIDChangedAt), are held until their latest change is older than the
	// settle time (a node's changes never longer than the settle cap in all
	// over its run of changes), so that a change applied node by node is
	// ordered as one.
	AnnotationTargetChangedAt = "express.medallia.com/target-changed-at"

	// AnnotationOrderChangedAt is when the admission webhook last saw the
	// node's order change without a rollout of a new target (RFC 3339,
	// UTC): created down or taken down (up: false), a prerequisite list the user
	// set changed, pause-rollout set or lifted. Such a
	// change releases or holds other nodes as a target change does, so the
	// settle time groups it as one: a node's latest change is the later of
	// the two stamps.
	AnnotationOrderChangedAt = "express.medallia.com/order-changed-at"

	// AnnotationNodeLeftTenantAt is when a node of this node's tenant
	// last left it (RFC 3339, UTC): deleted, or moved to another tenant
	// (a new spec.clusterConfig.clusterName). The validating webhook writes
	// it, as the sequencer, on every node of the tenant that stays, before
	// the departure is stored: the nodes after the one that left stop
	// waiting for it, and the settle time groups that with the rest of its
	// apply. It is the tenant's change, no node's own: it holds the tenant
	// for the settle time, with no cap, and takes no part in a node's run
	// of changes. The sequencer writes it too, to date again at its own now
	// a date ahead of its clock (AnnotationNodeLeftTenantAtReplaces).
	AnnotationNodeLeftTenantAt = "express.medallia.com/node-left-tenant-at"

	// AnnotationNodeLeftTenantAtReplaces, on the sequencer's write of an
	// earlier AnnotationNodeLeftTenantAt, names the stored date it replaces:
	// one ahead of the sequencer's clock, that a webhook replica whose clock
	// ran ahead wrote. The admission webhook takes the earlier date only
	// from the sequencer and only over that very date, and never stores
	// this annotation: a date only ever moves later otherwise.
	AnnotationNodeLeftTenantAtReplaces = "express.medallia.com/node-left-tenant-at-replaces"

	// AnnotationTargetChangesBeganAt is where the settle cap counts the
	// node's current run of target (and order) changes from (RFC 3339, UTC):
	// the admission webhook sets it at a change that begins a run, keeps it
	// while each change comes less than the settle time after the previous
	// one, and, for a change made while the settle hold still holds the
	// node, moves it on by the part of the gap beyond the settle time, which
	// the previous change did not hold (a start ahead of the webhook's clock
	// is taken as its now). In a tenant without rollout-id a node's latest
	// change holds the tenant no longer than the settle cap after this
	// start: so a node's changes hold the tenant for the cap in all, and a
	// node rewritten forever cannot hold the tenant forever.
	AnnotationTargetChangesBeganAt = "express.medallia.com/target-changes-began-at"

	// AnnotationPauseRollout set to "true" holds the node (and so every node
	// after it) until it is removed.
	AnnotationPauseRollout = "express.medallia.com/pause-rollout"

	// AnnotationIgnorePrerequisites set to "true" releases the node whatever
	// the state of its prerequisites: the escape hatch for an operator on call.
	AnnotationIgnorePrerequisites = "express.medallia.com/ignore-prerequisites"
)

// RolloutHistoryLength is how many earlier rollouts a node's
// rollout-history annotation keeps.
const RolloutHistoryLength = 5

// GateSequencer is the rollout gate owned by express-sequencer, on nodes and
// as a pod scheduling gate. The admission webhook adds it to a node when its
// rollout target changes, and to a new pod of a node whose provisioning
// prerequisites are not Ready; the sequencer removes both once the node's
// prerequisites hold.
const GateSequencer = "express.medallia.com/sequencer"

// FieldManager is the field manager express-sequencer writes with.
const FieldManager = "express-sequencer"

// FieldManagerGuardedRelease is the field manager of a release the
// sequencer planned on a scoped read (--scoped-reads): one that rests on the
// release guard's read of the whole tenant as it is written. A webhook
// replica that does not judge releases (--recheck-releases=false) refuses it
// (CauseReleaseNotJudged), so such a release never goes through unjudged.
const FieldManagerGuardedRelease = "express-sequencer-guarded-release"

// CauseReleaseNotJudged is the cause type of the refusal of a guarded
// release by a webhook replica that does not judge releases: the sequencer
// reads the tenant whole for its releases for a while.
const CauseReleaseNotJudged = "express.medallia.com/ReleaseNotJudged"

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
	// ReasonNodeDown: the node is intentionally down (up: false) or being
	// deleted; it takes no part in the order.
	ReasonNodeDown = "NodeDown"
	// ReasonPrerequisitesIgnored: released by the ignore-prerequisites annotation.
	ReasonPrerequisitesIgnored = "PrerequisitesIgnored"
	// ReasonWaitingForPrerequisite: a prerequisite is not Ready or not on target.
	ReasonWaitingForPrerequisite = "WaitingForPrerequisite"
	// ReasonPrerequisiteNotFound: an explicit prerequisite, or the tenant's
	// Backend, does not exist.
	ReasonPrerequisiteNotFound = "PrerequisiteNotFound"
	// ReasonPrerequisitePinUnreachable: a prerequisite entry pins a version
	// or revision that the named node's pods do not run and its own target
	// does not carry either: no rollout of it will meet the pin until one of
	// the two specs changes.
	ReasonPrerequisitePinUnreachable = "PrerequisitePinUnreachable"
	// ReasonSettling: a tenant without rollout-id, or a node's target or
	// order without a new rollout-id, changed less than the settle time ago: more
	// of one change may still be landing.
	ReasonSettling = "Settling"
	// ReasonChangeLanding: the tenant's live nodes disagree on rollout-id: a
	// change applied node by node has not fully landed yet.
	ReasonChangeLanding = "ChangeLanding"
	// ReasonRecovering: the node's released target is not Ready (a crash, an
	// eviction, a node coming back with the same target). Status False while
	// its new pods are held scheduling-gated until its provisioning
	// prerequisites are Ready, True once they may schedule.
	ReasonRecovering = "Recovering"
	// ReasonRolloutPodsHeld: the node's released rollout is under way, but
	// its new pods are held scheduling-gated until a provisioning
	// prerequisite that went down meanwhile is Ready again.
	ReasonRolloutPodsHeld = "RolloutPodsHeld"
	// ReasonRolloutPaused: held by the pause-rollout annotation, on this node
	// or on a prerequisite.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonDependencyCycle: the node waits, directly or through others, for
	// itself.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonProgressDeadlineExceeded: the node was released but did not become
	// Ready on its target within the progress deadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonNameShared: a Backend and a Frontend of the namespace share the
	// node's name, so its pods cannot be told apart from the other's: they
	// are held, and the node reads as not Ready, until one is renamed.
	ReasonNameShared = "NameShared"
)

// Sequencing modes, per namespace (DESIGN §9).
const (
	// LabelSequencing on a namespace sets how express-sequencer treats the
	// tenants in it: ModeEnforce or ModeAudit. A namespace without it takes
	// the installation's default (the chart's sequencing.defaultMode).
	LabelSequencing = "express.medallia.com/sequencing"
	// ModeEnforce: the webhooks gate, the sequencer releases in order.
	ModeEnforce = "enforce"
	// ModeAudit: the webhooks admit as in enforce (defaults, target hash,
	// history) but add no gate, to nodes or to pods; the sequencer releases
	// nothing and says, with ReasonWouldHold, what it would hold. Gates left
	// from enforce are removed.
	ModeAudit = "audit"
)

// ReasonWouldHold: in audit mode, the sequencer would hold the node (or its
// new pods) if the namespace enforced; the message says for what. Nothing
// holds it.
const ReasonWouldHold = "WouldHold"

// Annotations of a pod in audit mode: the hold enforcing would have put on
// a recovering node's new pod, and its end. Nothing holds the pod; the
// order auditor reads them to report a recovery enforcing would have held.
const (
	// AnnotationWouldHoldPod is written by the pod admission webhook, in
	// audit mode, on a new pod it would have created scheduling-gated: what
	// the pod would have waited for.
	AnnotationWouldHoldPod = "express.medallia.com/would-hold"
	// AnnotationWouldReleaseAt is written by the sequencer, in audit mode,
	// on a pod carrying AnnotationWouldHoldPod, when its plan would have
	// removed the scheduling gate (RFC 3339, UTC, nanoseconds).
	AnnotationWouldReleaseAt = "express.medallia.com/would-release-at"
)

// ConditionOrderKept is the order auditor's condition, written only when it
// finds a rollout that did not keep the order (status False): a node rolled
// while gated (ReasonOrderViolation), or, in audit mode, a node whose new
// target started while the sequencer would have held it
// (ReasonWouldHaveHeld). A rollout that keeps the order writes nothing.
const ConditionOrderKept = "OrderKept"

// Reasons of the OrderKept condition, also used as Event reasons.
const (
	// ReasonOrderViolation: a pod of the node was created, for a target the
	// node did not run when its gate was added, while the gate held it: the
	// Express operator rolled a gated node, or the pod was made by hand.
	ReasonOrderViolation = "OrderViolation"
	// ReasonWouldHaveHeld: in audit mode, the node's new target started
	// while the sequencer's plan would still have held it.
	ReasonWouldHaveHeld = "WouldHaveHeld"
)

// FieldManagerAuditor is the field manager the order auditor writes its
// condition with: the sequencer's PrerequisitesReady stays the sequencer's.
const FieldManagerAuditor = "express-sequencer-auditor"
