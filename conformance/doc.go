// Package conformance checks an Express operator against the contract
// express-sequencer's ordering rests on (docs/express-operator-contract.md),
// clause by clause, the way Gateway API implementations run its conformance
// suite and CSI drivers run csi-test's sanity package.
//
// An operator's own tests call Run with a rest.Config of a cluster where
// the operator runs (an envtest or kind cluster, with or without
// express-sequencer installed) and a scratch namespace:
//
//	func TestExpressContract(t *testing.T) {
//		conformance.Run(t, conformance.Config{RESTConfig: cfg, Namespace: "express-conformance"})
//	}
//
// Each clause creates a tenant of its own in the namespace (a Backend named
// after the clause, and for gate-only-hold a Frontend beside it), drives
// changes to it and judges what the operator does, by reading the node, its
// StatefulSets and its pods; every
// clause runs at the same time as the others and cleans up after itself.
// A failure says what broke the rule and when: the object and the moment.
// Check returns the same as a Report (YAML in the shape of Gateway API's
// conformance reports, JUnit XML for CI); kubectl express conformance runs
// it against a live cluster.
//
// With express-sequencer installed its admission webhook stamps the
// target hash and gates each change; without it the kit writes the hash
// annotation itself, as the webhook would, so the operator is checked the
// same way. A clause that needs the sequencer says so and is skipped
// without it.
package conformance
