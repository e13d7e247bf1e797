// Package audit is the order auditor (DESIGN §9): it watches Express
// nodes, their pods and StatefulSets, and judges the rollouts the cluster
// actually made — by the order the API server stored things in, never by
// calling the planner, so that it cannot share the planner's mistakes. A
// pod created while its node was gated (or, in audit mode, held by the
// sequencer's plan), made for a target neither the node's pods nor its
// StatefulSet's template ran when the hold began, is a finding. It never
// holds, gates or releases anything: it counts, says an Event and writes
// the node's OrderKept condition.
//
// Judge is the pure part; Auditor feeds it from watches and reports what
// it finds.
package audit
