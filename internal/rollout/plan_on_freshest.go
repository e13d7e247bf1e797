package rollout

import (
	"errors"
	"slices"
)

// PlanOnFreshest chooses what a pass acts on: the plan of the cached
// snapshot, unless that plan releases anything or records a rollout
// complete — then the plan of a snapshot read fresh (readFresh; nil when
// there is no fresh reader, as in the preview). A nil cached snapshot (the
// cache could not be compared with the sequencer's own writes) is read
// fresh, and is an error without a fresh reader. It reports whether it read
// fresh.
func PlanOnFreshest(cached *Snapshot, readFresh func() (*Snapshot, error)) (*Snapshot, []Decision, bool, error) {
	if cached != nil {
		decisions := Plan(cached)
		if readFresh == nil || !needsFreshReads(cached, decisions) {
			return cached, decisions, false, nil
		}
	}
	if readFresh == nil {
		return nil, nil, false, errors.New("no snapshot to plan: none cached and no fresh reader")
	}
	snap, err := readFresh()
	if err != nil {
		return nil, nil, true, err
	}
	return snap, Plan(snap), true, nil
}

// ReleasesAny reports whether a plan removes a node's gate or a pod's.
func ReleasesAny(s *Snapshot, decisions []Decision) bool {
	return slices.ContainsFunc(decisions, func(d Decision) bool { return Releasing(s, d) || len(d.PodsToRelease) > 0 })
}

// needsFreshReads reports whether a plan releases anything or records a
// rollout complete.
func needsFreshReads(s *Snapshot, decisions []Decision) bool {
	return slices.ContainsFunc(decisions, func(d Decision) bool { return restsOnFreshState(s, d) })
}

// The reads PlanOnScoped planned on.
const (
	// ReadCache: the cache alone; the plan releases and records nothing.
	ReadCache = ""
	// ReadDecision: the cache, with what the plan's releases and records
	// rest on read fresh by name (ScopeOf).
	ReadDecision = "decision"
	// ReadTenant: the whole tenant, read fresh.
	ReadTenant = "tenant"
)

// Fallback is why a plan was made on the tenant read whole after a
// narrower read was tried: Label is the fallback label of
// express_sequencer_release_reads_total, Why the words for the log. The
// zero Fallback is none: the narrower read was enough.
type Fallback struct{ Label, Why string }

// None reports whether f is no fallback.
func (f Fallback) None() bool { return f.Label == "" }

// The fallback labels.
const (
	// FallbackWider: planned on the narrower read, the plan rested on
	// nodes beyond those read.
	FallbackWider = "wider"
	// FallbackCache: there was no cached snapshot to plan on.
	FallbackCache = "cache"
	// FallbackNaming: a node's workload could not be read by name (the
	// contract's StatefulSet naming rule does not hold for it).
	FallbackNaming = "naming"
	// FallbackGuard: the release guard would not judge every release of
	// the namespace, or the namespace is not enforced.
	FallbackGuard = "guard"
	// FallbackMoved: a read by name — a pod admission's, or the
	// sequencer's of the workload a plan rests on — read again, was not
	// what it was: not one moment.
	FallbackMoved = "moved"
)

// fallbackWider and fallbackCache are the fallbacks PlanOnScoped makes itself.
var (
	fallbackWider = Fallback{FallbackWider, "planned on it, the plan rests on nodes beyond those read"}
	fallbackCache = Fallback{FallbackCache, "the cache could not be compared with the sequencer's own writes"}
)

// PlanOnScoped is PlanOnFreshest with a narrower read first, for a
// sequencer whose every release is judged again on a fresh read of the
// tenant as it is written (the release guard): a plan of the cache that
// releases anything or records a rollout complete is made again on the
// cache with the workload of the nodes it rests on read fresh
// (readScoped(ScopeOf)), and that plan is the one applied if what it rests
// on was read. readScoped returns why it could not read them, and the
// tenant is then read whole (readFresh), as it is when the new plan rests
// on nodes beyond those read. It returns which read the plan was made on
// and, for a tenant read in its stead, why the narrower read was not
// enough.
func PlanOnScoped(cached *Snapshot, readScoped func(scope []string) (*Snapshot, Fallback, error), readFresh func() (*Snapshot, error)) (snap *Snapshot, decisions []Decision, read string, why Fallback, err error) {
	if cached != nil {
		decisions = Plan(cached)
		if !needsFreshReads(cached, decisions) {
			return cached, decisions, ReadCache, Fallback{}, nil
		}
		scope := ScopeOf(cached, decisions)
		scoped, why, err := readScoped(scope)
		if err != nil {
			return nil, nil, ReadDecision, Fallback{}, err
		}
		if why.None() {
			decisions = Plan(scoped)
			if Covers(scope, ScopeOf(scoped, decisions)) {
				return scoped, decisions, ReadDecision, Fallback{}, nil
			}
			why = fallbackWider
		}
		snap, err = readFresh()
		if err != nil {
			return nil, nil, ReadTenant, why, err
		}
		return snap, Plan(snap), ReadTenant, why, nil
	}
	snap, err = readFresh()
	if err != nil {
		return nil, nil, ReadTenant, Fallback{}, err
	}
	return snap, Plan(snap), ReadTenant, fallbackCache, nil
}

// Releasing reports whether the decision removes the node's gate.
func Releasing(s *Snapshot, d Decision) bool {
	return !d.Gated && Gated(s.Nodes[d.Node])
}
