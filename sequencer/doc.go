// Package sequencer keeps each Express node gated until its live, not
// intentionally down, prerequisites are Ready and on their target version,
// then releases it, and explains every wait in the node's PrerequisitesReady
// condition and an Event.
//
// It is split the way Cluster API's rollout planner is: Gather reads one
// tenant's Snapshot from the cache, Plan decides purely (no client, no
// clock), and the Reconciler applies the decisions. The unit of work is the
// tenant, since the order is a property of the whole tenant: any change to
// one of its nodes or their pods enqueues it, and one Plan decides every
// node at once from one consistent snapshot.
//
// # When a node may proceed
//
// A node has pending work when it is up and gated, not Ready, or not on its
// target (every pod labelled with its expressVersion and deploymentRevision).
// A node that is not Ready is provisioned: every live provisioning
// prerequisite must be Ready. A Ready node with a new target is upgraded:
// every live provisioning prerequisite must be Ready and every live upgrade
// prerequisite Ready and on its target. A defaulted prerequisite list means
// every live node before this one in the reduced order (the default order
// without intentionally-down and absent nodes); an explicit list is followed
// entry by entry, through down nodes to their own prerequisites.
//
// # The state machine of one node
//
//	stateDiagram-v2
//	    [*] --> Gated: admitted up (webhook adds the gate)
//	    Steady --> Gated: rollout target changed (webhook)
//	    Gated --> Gated: prerequisites not met / paused\n(WaitingForPrerequisite, PrerequisiteNotFound,\nRolloutPaused, DependencyCycle)
//	    Gated --> Released: prerequisites met\n(or ignore-prerequisites)
//	    Released --> Steady: Ready on target (RolloutComplete)
//	    Released --> Stalled: progress deadline passed\n(ProgressDeadlineExceeded)
//	    Stalled --> Steady: Ready on target
//	    Steady --> Gated: new pending work (crash) and\nprerequisites not met
//	    Steady --> Released: new pending work and prerequisites met
//	    Steady --> Down: up: false (NodeDown)
//	    Gated --> Down: up: false
//	    Down --> Gated: up: true (webhook)
//
// A released node is never gated again for the same rollout: once the
// Express operator is rolling it, holding it would only leave it half done.
// Only a new target (the webhook gates it) starts the machine over.
package sequencer
