// Package defaults holds the operator's default rollout order and the default
// prerequisites it implies. It is pure: no client, no clock.
//
// An order is a head of node keys followed by every other frontend in
// ascending number, so one short list describes tenants of any size:
//
//	provisioning: [be]            → be, fe1, fe2, fe3, …, feN
//	upgrade:      [fe1, fe2, be]  → fe1, fe2, be, fe3, …, feN
//
// The default prerequisite of a node is its predecessor in each order, which
// is exactly the table the tenant chart used to ship as allNodeConfig.
package defaults
