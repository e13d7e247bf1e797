package conformance

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// pinnedLoop gives u the lists of the old chart's pinned loop on a tenant
// of a Backend and one Frontend: the Backend upgrades after the Frontend
// runs version, the Frontend is provisioned after the Backend runs it.
// Changed to version together, each waits for the other's rollout; the
// sequencer breaks the loop by the provisioning order (DESIGN §4).
func pinnedLoop(u *unstructured.Unstructured, other *probe, version string) {
	entry := []any{map[string]any{"expressNode": other.name, "kind": other.gvk().Kind, "expressVersion": version,
		"podConditionType": "Ready", "conditionStatus": "True"}}
	provisioning, upgrade := []any{}, entry
	if u.GetKind() == v2alpha1.KindFrontend {
		provisioning, upgrade = entry, []any{}
	}
	setField(u, provisioning, "deploymentDependencies", "provisioningPrerequisites")
	setField(u, upgrade, "deploymentDependencies", "upgradePrerequisites")
}

// checkGateIsTheOnlyHold provisions a Backend and a Frontend whose lists
// form the old chart's pinned loop, then changes both to the second
// version. The sequencer releases the Backend first (the provisioning
// order breaks the loop) and the Frontend once the Backend is Ready: the
// operator must roll each as soon as no gate holds it. An operator that
// also waits for the node's own lists holds the Backend behind the
// Frontend, which the sequencer holds behind the Backend: neither rolls.
func checkGateIsTheOnlyHold(ctx context.Context, p *probe) error {
	fe := p.sibling("fe1")
	defer fe.delete(context.WithoutCancel(ctx))
	v0, v1 := p.cfg.Versions[0], p.cfg.Versions[1]
	p.rolloutID, fe.rolloutID = "conformance-loop-1", "conformance-loop-1"
	if _, err := p.create(ctx, v0, func(u *unstructured.Unstructured) { pinnedLoop(u, fe, v0) }); err != nil {
		return err
	}
	if err := p.waitRolled(ctx, "the Backend's first rollout"); err != nil {
		return err
	}
	if _, err := fe.create(ctx, v0, func(u *unstructured.Unstructured) { pinnedLoop(u, p, v0) }); err != nil {
		return err
	}
	if err := fe.waitRolled(ctx, "the Frontend's first rollout"); err != nil {
		return err
	}
	p.rolloutID, fe.rolloutID = "conformance-loop-2", "conformance-loop-2"
	for _, n := range []struct{ node, other *probe }{{p, fe}, {fe, p}} {
		if _, err := n.node.update(ctx, func(u *unstructured.Unstructured) {
			setField(u, v1, "expressVersion")
			pinnedLoop(u, n.other, v1)
		}); err != nil {
			return err
		}
	}
	for _, n := range []struct {
		node *probe
		what string
	}{{p, "the Backend, released first"}, {fe, "the Frontend, released once the Backend was Ready"}} {
		if err := n.node.waitRolled(ctx, fmt.Sprintf("a change of both nodes to %s: %s", v1, n.what)); err != nil {
			return n.node.heldByItsLists(ctx, err)
		}
	}
	return nil
}

// heldByItsLists explains err, a rollout not carried out, when no gate
// held the node at the end: the operator held it itself.
func (p *probe) heldByItsLists(ctx context.Context, err error) error {
	u, gerr := p.get(ctx)
	if gerr != nil || len(gates(u)) > 0 {
		return err
	}
	names := []string{}
	for _, list := range []string{"provisioningPrerequisites", "upgradePrerequisites"} {
		entries, _, _ := unstructured.NestedSlice(u.Object, "spec", "deploymentDependencies", list)
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok {
				name := fmt.Sprint(m["expressNode"])
				if v, ok := m["expressVersion"].(string); ok && v != "" {
					name += " on " + v
				}
				names = append(names, fmt.Sprintf("%s (%s)", name, list))
			}
		}
	}
	slices.Sort(names)
	return fmt.Errorf("%w; no rollout gate held %s by then, so the operator held it itself (or is slower than the rollout timeout) — its lists name %v, which express-sequencer releases past where the wait is circular: an operator that waits for its lists deadlocks with it (the gate is the only hold)",
		err, p.name, names)
}
