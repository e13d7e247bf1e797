// Package sequencer is the controller that applies the rollout package's
// decisions: for each tenant it reads a rollout.Snapshot, plans with
// rollout.Plan, and makes every node match its decision — the sequencer's
// gate on the node, the scheduling gates of its held pods, its
// PrerequisitesReady condition and an Event. It also writes what carries
// a tenant across a change of its namespace's mode (switchMode), the
// record of a rollout that converged while gated (recordConverged), and a
// departure date ahead of its clock dated again at its now
// (dateFutureDeparturesAgain).
//
// It is split the way Cluster API keeps its rollout planner apart from its
// reconciler: Gather reads one tenant's snapshot from the cache, rollout
// decides purely (no client, no clock), and the Reconciler applies the
// decisions. The unit of work is the tenant, since the order is a property
// of the whole tenant: any change to one of its nodes or their pods
// enqueues it, and one Plan decides every node at once from one consistent
// snapshot.
//
// Passes that only wait or explain are decided on the cache, with the
// sequencer's own writes laid over it until the cache has them. A plan that
// releases a node or a pod, or records a rollout complete, is made again
// from fresh reads of the API server (rollout.PlanOnFreshest): consistent
// LISTs of the namespace (GatherFresh). The pod admission webhook decides on
// the same fresh reads (GatherFreshFor).
//
// What the decisions mean — targets, modes and the state machine of one
// node — is described in the rollout package and drawn in docs/sequencer.md.
package sequencer
