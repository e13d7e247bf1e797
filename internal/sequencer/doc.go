// Package sequencer keeps each Express node gated until its live, not
// intentionally down, prerequisites are Ready and on their target, then
// releases it; keeps the recreated pods of a recovering node
// scheduling-gated until its provisioning prerequisites are Ready; and
// explains every wait in the node's PrerequisitesReady condition and an
// Event.
//
// It is split the way Cluster API's rollout planner is: Gather reads one
// tenant's Snapshot from the cache, Plan decides purely (no client, no
// clock), and the Reconciler applies the decisions. The unit of work is the
// tenant, since the order is a property of the whole tenant: any change to
// one of its nodes or their pods enqueues it, and one Plan decides every
// node at once from one consistent snapshot. The admission rules (Admit,
// PodsMayStart, AdmissionCycle) are pure too and shared with the webhooks
// and kubectl-express.
//
// # Targets and modes
//
// A node's target is the hash of its whole raw spec minus
// deploymentDependencies, rolloutGates and up (TargetHash), stamped by the
// webhook. The sequencer records the target it released in the patch that
// removes the gate. A gated node that was never released is provisioned
// (every live provisioning prerequisite Ready); one with a target it was not
// released for is upgraded (also every live upgrade prerequisite Ready on its
// target), unless that wait is circular with a provisioning wait, where the
// provisioning order wins; one brought back with the target it was released
// for is provisioned. A node in a released rollout that has not converged,
// or released in the same pass, is Ready for no one; its new pods are held
// by a predecessor that is not Ready, unless every such predecessor may wait
// for the rollout (PodsMayStart).
//
// # The state machine of one node
//
// It is drawn once, in docs/sequencer.md ("The state machine of one
// node"), with the reasons each state shows.
//
// Only the webhook adds a CR gate, and only for a user change: a released
// node is never gated again for the same target.
package sequencer
