package rollout

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// cutCopies are copies of nodes with their annotations cut as the
// sequencer's cache keeps them.
func cutCopies(nodes map[string]v2alpha1.Node) map[string]v2alpha1.Node {
	cut := make(map[string]v2alpha1.Node, len(nodes))
	for name, n := range nodes {
		n = n.DeepCopyObject().(v2alpha1.Node)
		CutForCache(n.GetAnnotations())
		cut[name] = n
	}
	return cut
}

// cutNodes is s with every node's annotations cut as the sequencer's
// cache keeps them.
func cutNodes(s *Snapshot) *Snapshot {
	cut := *s
	cut.Nodes = cutCopies(s.Nodes)
	return &cut
}

// forgetHistories is s with every node's rollout-history removed.
func forgetHistories(s *Snapshot) *Snapshot {
	out := cutNodes(s)
	for _, n := range out.Nodes {
		delete(n.GetAnnotations(), v2alpha1.AnnotationRolloutHistory)
	}
	return out
}

// Every pass of a tenant rolled through four targets — one a revert to
// the first, whose record the rollout-history keeps — with a crash of a
// node on the new target and another mid-rollout, plans alike on nodes cut
// as the cache keeps them and on the nodes whole: on the tenant as a fresh
// read finds it, and as the cache holds it (no StatefulSet, where the
// history tells a converged release).
func TestAPlanOnNodesCutForTheCacheDecidesAsOnTheWholeNodes(t *testing.T) {
	const v3 = "express-e689.160"
	w := newWorld(t, "t")
	w.tenant(5, v1)
	w.run(200)
	passes, historyDecides := 0, 0
	check := func() {
		cached := w.cacheSnapshot()
		whole := *cached
		whole.Nodes = w.nodes
		for _, s := range []*Snapshot{w.snapshot(), &whole} {
			plan := Plan(s)
			require.Equal(t, plan, Plan(cutNodes(s)), "tick %d", w.tick)
			if !assert.ObjectsAreEqual(plan, Plan(forgetHistories(s))) {
				historyDecides++
			}
			passes++
		}
	}
	for _, change := range []struct {
		version string
		crash   []string
	}{{v2, nil}, {v3, []string{"fe2"}}, {v1, []string{"be"}}, {v2, []string{"fe1", "fe4"}}} {
		w.setVersion(change.version, "be", "fe1", "fe2", "fe3", "fe4")
		for i := 0; i < 200 && (i < 3 || !w.settled()); i++ {
			if i == 2 {
				w.crash(change.crash...)
			}
			w.step()
			check()
		}
		require.True(t, w.settled(), "the tenant settles on %s", change.version)
	}
	assert.Positive(t, historyDecides, "some pass decides otherwise without the histories: the comparison reaches what is cut")
	t.Logf("%d passes compared, %d of them decided otherwise without the histories", passes, historyDecides)
}

func TestCuttingARolloutHistoryForTheCache(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 12, 2, 10, 0, s, 0, time.UTC) }
	records := []RolloutRecord{
		{Target: "h1", RolloutID: "r1", Gated: at(1), Released: at(2), Ready: at(3), Replaced: at(4), Converged: ptr.To(true), After: []string{"t-fe1", "t-fe2"}},
		{Target: "h2", RolloutID: "r2", Gated: at(5), Released: at(6), Replaced: at(7), Converged: ptr.To(false), Down: true, After: []string{"t-be"}, AfterOmitted: 3},
	}
	whole, err := json.Marshal(records)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want map[string]string
	}{{
		name: "every record keeps its target and the last its release, readiness, convergence and Down",
		ann:  map[string]string{v2alpha1.AnnotationRolloutHistory: string(whole), v2alpha1.AnnotationTargetHash: "h3"},
		want: map[string]string{
			v2alpha1.AnnotationRolloutHistory: `[{"target":"h1"},{"target":"h2","released":"2026-12-02T10:00:06Z","converged":false,"down":true}]`,
			v2alpha1.AnnotationTargetHash:     "h3",
		},
	}, {
		name: "a history that does not decode is left whole",
		ann:  map[string]string{v2alpha1.AnnotationRolloutHistory: `[{"target":`},
		want: map[string]string{v2alpha1.AnnotationRolloutHistory: `[{"target":`},
	}, {
		name: "a node without a history is given none",
		ann:  map[string]string{v2alpha1.AnnotationTargetHash: "h1"},
		want: map[string]string{v2alpha1.AnnotationTargetHash: "h1"},
	}, {
		name: "an empty history stays empty",
		ann:  map[string]string{v2alpha1.AnnotationRolloutHistory: `[]`},
		want: map[string]string{v2alpha1.AnnotationRolloutHistory: `[]`},
	}, {
		name: "the last-applied manifest is cut to the lists it sets",
		ann:  map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"expressVersion":"e1","deploymentDependencies":{"upgradePrerequisites":[]}}}`},
		want: map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"deploymentDependencies":{"upgradePrerequisites":null}}}`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			CutForCache(tc.ann)
			assert.Equal(t, tc.want, tc.ann)
			again := map[string]string{}
			for k, v := range tc.ann {
				again[k] = v
			}
			CutForCache(again)
			assert.Equal(t, tc.ann, again, "cutting twice changes nothing")
		})
	}
}

// The plan reads of a history only what the cut keeps: on a node whose
// records differ only in what is cut, every question it asks of the
// history answers alike.
func TestACutHistoryAnswersWhatThePlanAsksOfIt(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 12, 2, 10, 0, s, 0, time.UTC) }
	whole := []RolloutRecord{
		{Target: "h1", RolloutID: "r1", Gated: at(1), Released: at(2), Ready: at(3), Replaced: at(4), Converged: ptr.To(true), After: []string{"t-fe1"}},
		{Target: "h2", RolloutID: "r2", Gated: at(5), Released: at(6), Ready: at(7), Replaced: at(8), Converged: ptr.To(true), After: []string{"t-be", "t-fe1"}},
	}
	data, err := json.Marshal(whole)
	require.NoError(t, err)
	ann := map[string]string{v2alpha1.AnnotationRolloutHistory: string(data)}
	CutForCache(ann)
	n := &v2alpha1.Frontend{}
	n.SetAnnotations(ann)
	cut := HistoryIn(n)
	require.Len(t, cut, len(whole))
	for i := range whole {
		assert.Equal(t, whole[i].Target, cut[i].Target, "record %d's target", i)
	}
	last, wholeLast := cut[len(cut)-1], whole[len(whole)-1]
	assert.True(t, wholeLast.Released.Equal(last.Released), "the last record's release")
	assert.True(t, wholeLast.Ready.Equal(last.Ready), "the last record's readiness")
	assert.Equal(t, wholeLast.Converged, last.Converged)
	assert.Equal(t, wholeLast.Down, last.Down)
	assert.Less(t, len(ann[v2alpha1.AnnotationRolloutHistory]), len(data)/2, "the cut keeps less than half")
}

// A node reverted to its first target and changed again keeps that first
// target in an earlier record of its rollout-history, not the last: a pod
// made for it waits for a release on the cut node as on the whole one
// (AwaitsRelease reads every record's target).
func TestAPodOfATargetInAnEarlierRecordAwaitsItsReleaseOnTheCutNodeAsOnTheWholeOne(t *testing.T) {
	w, s, v1hash, v2hash := revertedTenant(t)
	be := w.name("be")
	s = changedAgain(s, "v3")
	v3hash := StampedTarget(s.Nodes[be])
	history := HistoryIn(s.Nodes[be])
	require.GreaterOrEqual(t, len(history), 2)
	require.Equal(t, v1hash, history[0].Target, "v1 is an earlier record of be's history, not its last")
	cut, forgotten := cutNodes(s), cutNodes(s)
	delete(forgotten.Nodes[be].GetAnnotations(), v2alpha1.AnnotationRolloutHistory)
	readsHistory := 0
	for _, templates := range [][]Template{nil, {{Hash: v1hash}}, {{Hash: v2hash}}} {
		for _, snap := range []*Snapshot{s, cut, forgotten} {
			snap.SetTemplates = map[string][]Template{be: templates}
		}
		for _, hash := range []string{v1hash, v2hash, v3hash, "never-stamped"} {
			whole := s.AwaitsRelease(be, hash)
			assert.Equal(t, whole, cut.AwaitsRelease(be, hash), "a pod of %s, templates %v", hash, templates)
			if whole != forgotten.AwaitsRelease(be, hash) {
				readsHistory++
			}
		}
	}
	require.Positive(t, readsHistory, "some case's answer rests on the history")
}
