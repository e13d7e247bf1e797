package rollout

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Whether a pod of the template be's overtaken release recorded waits for
// be's release (AwaitsRelease): only the StatefulSet the release recorded,
// its spec unchanged since and rolled out whole then, makes a recovery.
func TestAPodOfTheTemplateAnOvertakenReleaseRecordedWaitsUnlessTheStatefulSetIsAsItWasThen(t *testing.T) {
	w := newWorld(t, "acme")
	settled(3)(w)
	be := w.name("be")
	runs := w.pods[be][0].Hash
	w.toggleOtherSystemsGate("be")
	w.setVersion(v2, "be")
	w.stepUntilReleased("be")
	w.setVersion("express-e689.160", keysOf(3)...)
	base := w.snapshot()
	require.Len(t, base.SetTemplates[be], 1)
	at, ok := releasedSet(base.Nodes[be])
	require.True(t, ok)
	require.Positive(t, at.generation, "the release recorded the generation: %s", base.Nodes[be].GetAnnotations()[v2alpha1.AnnotationReleasedSetRevision])

	cases := map[string]struct {
		template   func(*Template)
		annotation string
		waits      bool
	}{
		"the StatefulSet as the release recorded it makes a recovery":                {waits: false},
		"its generation moved on since (a template moved away and back, a scale-up)": {template: func(t *Template) { t.Generation++ }, waits: true},
		"another StatefulSet of the name (deleted and made again)":                   {template: func(t *Template) { t.SetUID = "another" }, waits: true},
		"a rolling update under way at the release":                                  {template: func(t *Template) { t.UpdateRevision = "newer" }, waits: true},
		"a record of an earlier version, without a generation":                       {annotation: at.uid + "/" + at.revision, waits: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := *base
			s.SetTemplates = maps.Clone(base.SetTemplates)
			s.SetTemplates[be] = slices.Clone(base.SetTemplates[be])
			if c.template != nil {
				c.template(&s.SetTemplates[be][0])
			}
			if c.annotation != "" {
				s.Nodes = maps.Clone(base.Nodes)
				n := base.Nodes[be].DeepCopyObject().(v2alpha1.Node)
				setAnnotation(n, v2alpha1.AnnotationReleasedSetRevision, c.annotation)
				s.Nodes[be] = n
			}
			assert.Equal(t, c.waits, s.AwaitsRelease(be, runs))
		})
	}
}

// A sequencer of an earlier version reads released-set-revision as
// "<uid>/<currentRevision>": the generation rides on the UID, so it finds
// another UID there — no record of the release — rather than a revision
// that moved on since (a rollout it would take as converged).
func TestAReleasedSetRecordReadsAsAnotherStatefulSetsToAnEarlierVersion(t *testing.T) {
	w := newWorld(t, "acme")
	settled(3)(w)
	w.setVersion(v2, keysOf(3)...)
	w.run(200)
	be := w.name("be")
	record := w.nodes[be].GetAnnotations()[v2alpha1.AnnotationReleasedSetRevision]
	require.NotEmpty(t, record)
	at, ok := releasedSet(w.nodes[be])
	require.True(t, ok)
	uid, _, _ := strings.Cut(record, "/")
	assert.NotEqual(t, at.uid, uid, "an earlier version's reading of %q", record)
	assert.Equal(t, string(setUID(w.nodes[be])), at.uid)
}

// The release read be's StatefulSet just after its template was moved to
// a target be was never released for (an operator that rolls a gated
// node, or audit mode), before the controller acted on it: its status
// still names the revision of the template before. The controller makes
// the new template's pods before it writes the status that says so, so a
// pod of that target meets the StatefulSet at the generation the release
// read, its update revision the one recorded. Recorded with that
// generation, the pod was taken for a recovery of what be ran and started
// by the pod rule: be rolled onto a target it was never released for.
func TestAReleaseThatReadAStatefulSetItsControllerHadNotActedOnRecordsNoGeneration(t *testing.T) {
	w := newWorld(t, "acme")
	settled(3)(w)
	be := w.name("be")
	w.toggleOtherSystemsGate("be")
	w.setVersion(v2, "be")
	w.stepUntilReleased("be")
	w.setVersion("express-e689.160", keysOf(3)...)
	never := "never-released"
	sets := w.statefulSets()
	i := slices.IndexFunc(sets, func(s appsv1.StatefulSet) bool { return s.Name == be })
	require.GreaterOrEqual(t, i, 0)
	sets[i].Spec.Template.Labels[v2alpha1.LabelTargetHash] = never
	sets[i].Generation++ // the controller has not acted on it: status as before

	s := w.snapshot()
	s.Nodes = maps.Clone(s.Nodes)
	n := s.Nodes[be].DeepCopyObject().(v2alpha1.Node)
	setAnnotation(n, v2alpha1.AnnotationReleasedSetRevision, setRevisions(sets, s)[be])
	s.Nodes[be] = n
	s.SetTemplates = setTemplates(sets, s.Nodes)
	require.NotEqual(t, never, ReleasedTarget(n))
	require.NotEqual(t, never, StampedTarget(n))

	assert.True(t, s.AwaitsRelease(be, never), "a pod of a target be was never released for waits for its release; recorded %q",
		n.GetAnnotations()[v2alpha1.AnnotationReleasedSetRevision])
}
