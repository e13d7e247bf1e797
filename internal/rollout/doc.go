// Package rollout decides, purely, how one tenant's Express nodes roll out:
// it keeps each node gated until its live, not intentionally down,
// prerequisites are Ready and on their target, then releases it; keeps the
// recreated pods of a recovering node scheduling-gated until its
// provisioning prerequisites are Ready; and explains every wait in the
// node's PrerequisitesReady condition and an Event.
//
// It is the planner half of the split Cluster API makes between its rollout
// planner and its reconciler: Plan takes a Snapshot of one tenant — its
// nodes, their pods, the installation's default orders and the time — and
// returns one Decision per node, with no client, no context and no clock.
// The order is a property of the whole tenant, so one Plan decides every
// node at once from one consistent snapshot. The admission rules (Admit,
// PodsMayStart, AdmissionCycle) and the preview (Preview) are pure too, and
// shared by the sequencer, the webhooks and kubectl-express; the sequencer
// package reads the snapshots and applies the decisions.
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
package rollout
