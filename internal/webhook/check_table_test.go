package webhook

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// checkNode is a node of tenant cluster with explicit lists (nil: defaulted,
// as the mutating webhook leaves a list it filled in).
func checkNode(kind, name, cluster string, prov, upg []v2alpha1.Prerequisite) v2alpha1.Node {
	n := v2alpha1.NewNode(kind)
	n.SetName(name)
	n.SetNamespace("ns")
	n.NodeSpec().ClusterConfig.ClusterName = cluster
	orders := defaults.Builtin()
	orders.Apply(n) // defaults where a list is absent, marked defaulted
	d := n.NodeSpec().DeploymentDependencies
	if prov != nil {
		d.ProvisioningPrerequisites = prov
	}
	if upg != nil {
		d.UpgradePrerequisites = upg
	}
	return n
}

func on(name, kind string) v2alpha1.Prerequisite {
	return v2alpha1.Prerequisite{ExpressNode: name, Kind: kind, PodConditionType: "Ready", ConditionStatus: "True"}
}

// Check's verdict on one node against its namespace, for every denial and
// warning of docs/defaults-and-overrides.md. Each case is a sentence, the
// node, its neighbours, and the field path and words the verdict must hold.
func TestCheckDeniesOrWarnsNamingTheFieldAndTheNodes(t *testing.T) {
	tenant := func() []v2alpha1.Node {
		return []v2alpha1.Node{
			checkNode(v2alpha1.KindBackend, "acme-be", "acme", nil, nil),
			checkNode(v2alpha1.KindFrontend, "acme-fe1", "acme", nil, nil),
			checkNode(v2alpha1.KindFrontend, "acme-fe2", "acme", nil, nil),
			checkNode(v2alpha1.KindFrontend, "zeta-fe1", "zeta", nil, nil),
		}
	}
	fe := v2alpha1.KindFrontend
	none := []v2alpha1.Prerequisite{}
	cases := map[string]struct {
		node       v2alpha1.Node
		neighbours []v2alpha1.Node
		denied     string // "" when admitted
		warned     string // "" when no warning is expected
	}{
		"a list the old chart renders (only the predecessor, explicit) is admitted with a warning that it is followed literally": {
			node: func() v2alpha1.Node {
				n := checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("acme-fe2", fe)}, none)
				delete(n.GetAnnotations(), v2alpha1.AnnotationDefaultedPrerequisites)
				return n
			}(),
			warned: "spec.deploymentDependencies.provisioningPrerequisites: [acme-fe2] names only acme-fe3's predecessor in the operator's order, as the old chart's allNodeConfig renders it; an explicit list is followed literally (acme-fe3 waits for acme-fe2 alone",
		},
		"a node waiting for itself is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("acme-fe3", fe)}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[0].expressNode: Invalid value: "acme-fe3": acme-fe3 cannot be its own prerequisite`,
		},
		"a loop of explicit prerequisites is denied and spelled out": {
			node: checkNode(fe, "acme-fe3", "acme", nil, []v2alpha1.Prerequisite{on("acme-fe1", fe)}),
			neighbours: []v2alpha1.Node{
				checkNode(v2alpha1.KindBackend, "acme-be", "acme", nil, nil),
				checkNode(fe, "acme-fe1", "acme", nil, []v2alpha1.Prerequisite{on("acme-fe2", fe)}),
				checkNode(fe, "acme-fe2", "acme", nil, []v2alpha1.Prerequisite{on("acme-fe3", fe)}),
			},
			denied: `spec.deploymentDependencies.upgradePrerequisites[0].expressNode: Invalid value: "acme-fe1": acme-fe3 → acme-fe1 → acme-fe2 → acme-fe3 is a cycle: none of these nodes could ever be released`,
		},
		"a Frontend named like a Backend of the namespace is denied": {
			node:   checkNode(fe, "acme-be", "acme", nil, nil),
			denied: `metadata.name: Invalid value: "acme-be": a Backend named acme-be already exists in namespace ns: a Backend and a Frontend cannot share a name`,
			warned: "Frontend acme-be does not fit the node names of tenant acme",
		},
		"a Backend named like a Frontend of another tenant is denied": {
			node:   checkNode(v2alpha1.KindBackend, "zeta-fe1", "zeta", nil, nil),
			denied: `metadata.name: Invalid value: "zeta-fe1": a Frontend named zeta-fe1 already exists in namespace ns`,
			warned: "Backend zeta-fe1 does not fit the node names of tenant zeta",
		},
		"a node of another tenant is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("zeta-fe1", fe)}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[0].expressNode: Invalid value: "zeta-fe1": zeta-fe1 belongs to tenant zeta, not acme`,
		},
		"a prerequisite of the wrong kind is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("acme-be", fe)}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[0].kind: Invalid value: "Frontend": acme-be is a Backend, not a Frontend`,
		},
		"an absent prerequisite named as the other kind is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("acme-fe9", v2alpha1.KindBackend)}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[0].kind: Invalid value: "Backend": acme-fe9 is named as a Frontend, not a Backend`,
		},
		"a prerequisite outside the tenant's names is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("other-fe1", fe)}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[0].expressNode: Invalid value: "other-fe1": other-fe1 is not a node of tenant acme`,
		},
		"the same node twice is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("acme-fe1", fe), on("acme-fe1", fe)}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[1].expressNode: Duplicate value: "acme-fe1 is already listed at index 0"`,
		},
		"an unknown pod condition is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{{ExpressNode: "acme-fe1", Kind: fe, PodConditionType: "Healthy", ConditionStatus: "True"}}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[0].podConditionType: Unsupported value: "Healthy"`,
		},
		"an unknown condition status is denied": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{{ExpressNode: "acme-fe1", Kind: fe, PodConditionType: "Ready", ConditionStatus: "Maybe"}}, nil),
			denied: `spec.deploymentDependencies.provisioningPrerequisites[0].conditionStatus: Unsupported value: "Maybe"`,
		},
		"an explicit prerequisite that does not exist yet is warned about": {
			node:   checkNode(fe, "acme-fe3", "acme", []v2alpha1.Prerequisite{on("acme-fe9", fe)}, nil),
			warned: "spec.deploymentDependencies.provisioningPrerequisites[0].expressNode: Frontend acme-fe9 does not exist yet; acme-fe3 waits for it until it does",
		},
		"a name that fits no node key is warned about": {
			node:   checkNode(fe, "acme-web", "acme", nil, nil),
			warned: "Frontend acme-web does not fit the node names of tenant acme (acme-be for the Backend, acme-fe<n> for Frontends)",
		},
		"a loop through the default order is warned about, not denied": {
			node:   checkNode(fe, "acme-fe1", "acme", nil, []v2alpha1.Prerequisite{on("acme-fe2", fe)}),
			warned: "spec.deploymentDependencies.upgradePrerequisites: acme-fe1 → acme-fe2 → acme-fe1 is a cycle (acme-fe2 → acme-fe1 by the default order)",
		},
		"explicit empty lists are admitted silently": {
			node: checkNode(fe, "acme-fe3", "acme", none, none),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			neighbours := tc.neighbours
			if neighbours == nil {
				neighbours = tenant()
			}
			warnings, errs := Check(tc.node, neighbours, defaults.Builtin())
			if tc.denied == "" {
				assert.Empty(t, errs)
			} else if assert.NotEmpty(t, errs) {
				assert.Contains(t, errs.ToAggregate().Error(), tc.denied)
			}
			if tc.warned == "" {
				assert.Empty(t, warnings)
			} else {
				assert.Contains(t, strings.Join(warnings, "\n"), tc.warned)
			}
		})
	}
}
