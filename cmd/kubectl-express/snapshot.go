package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// tenantSnapshot reads a tenant straight from the API server into the
// snapshot the sequencer plans on — its fresh reads, StatefulSets included
// — so the plugin decides with the sequencer's own Plan, with the given
// progress deadline and change grouping (none: as if every change had
// landed). An empty cluster names the namespace's only tenant.
func tenantSnapshot(ctx context.Context, c client.Reader, ns, cluster string, orders defaults.Orders, deadline time.Duration, grouping rollout.Grouping) (*rollout.Snapshot, error) {
	if cluster == "" {
		nodes, err := sequencer.NamespaceNodes(ctx, c, ns)
		if err != nil {
			return nil, err
		}
		tenants := map[string]bool{}
		for _, n := range nodes {
			tenants[n.NodeSpec().ClusterConfig.ClusterName] = true
		}
		names := make([]string, 0, len(tenants))
		for t := range tenants {
			names = append(names, t)
		}
		sort.Strings(names)
		switch len(names) {
		case 0:
			return nil, fmt.Errorf("no Backends or Frontends in namespace %q", ns)
		case 1:
			cluster = names[0]
		default:
			return nil, fmt.Errorf("namespace %q holds tenants %s: name one", ns, strings.Join(names, ", "))
		}
	}
	s, err := sequencer.GatherFresh(ctx, c, rollout.Tenant{Namespace: ns, ClusterName: cluster}, orders, time.Now(), deadline, grouping)
	if err != nil {
		return nil, err
	}
	if len(s.Nodes) == 0 {
		return nil, fmt.Errorf("no tenant %q in namespace %q", cluster, ns)
	}
	return s, nil
}

// orderOf returns the tenant's keyed nodes in an order: all of them, and
// the live ones only.
func orderOf(s *rollout.Snapshot, o defaults.Order) (all, live []string) {
	byKey := map[defaults.Key]string{}
	var keys, liveKeys []defaults.Key
	for name, n := range s.Nodes {
		if k, ok := defaults.KeyOf(n); ok {
			byKey[k] = name
			keys = append(keys, k)
			if n.NodeSpec().IsUp() {
				liveKeys = append(liveKeys, k)
			}
		}
	}
	for _, k := range o.Sequence(keys) {
		all = append(all, byKey[k])
		if slices.Contains(liveKeys, k) {
			live = append(live, byKey[k])
		}
	}
	return all, live
}
