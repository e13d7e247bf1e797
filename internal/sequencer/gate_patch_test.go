package sequencer

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// The gate patch adds or removes the sequencer's gate alone: another
// system's gate stays as stored, with fields the Go types do not model (a
// CRD whose gate items carry more than a name), where replacing the list
// with the decoded one dropped them.
func TestTheGatePatchTouchesOnlyTheSequencersGate(t *testing.T) {
	const other = `{"name":"example.com/change-freeze","reason":"quarter close"}`
	const ours = `{"name":"` + v2alpha1.GateSequencer + `"}`
	cases := map[string]struct {
		stored string // the stored rolloutGates
		gates  []string
		gated  bool
		want   string
	}{
		"a release beside another gate removes ours alone": {
			stored: `[` + other + `,` + ours + `]`, gates: []string{"example.com/change-freeze", v2alpha1.GateSequencer},
			want: `{"metadata":{"generation":3},"spec":{"rolloutGates":[` + other + `]}}`,
		},
		"a release of our gate alone removes the list": {
			stored: `[` + ours + `]`, gates: []string{v2alpha1.GateSequencer},
			want: `{"metadata":{"generation":3},"spec":{}}`,
		},
		"gating beside another gate appends ours": {
			stored: `[` + other + `]`, gates: []string{"example.com/change-freeze"}, gated: true,
			want: `{"metadata":{"generation":3},"spec":{"rolloutGates":[` + other + `,` + ours + `]}}`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			n := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Generation: 3}}
			for _, g := range c.gates {
				n.Spec.AddGate(g)
			}
			patch, err := gatePatch(n, gateWrite{gated: c.gated})
			require.NoError(t, err)
			data, err := patch.Data(n)
			require.NoError(t, err)
			ops, err := jsonpatch.DecodePatch(data)
			require.NoError(t, err)
			got, err := ops.Apply([]byte(`{"metadata":{"generation":3},"spec":{"rolloutGates":` + c.stored + `}}`))
			require.NoError(t, err)
			assert.JSONEq(t, c.want, string(got))
		})
	}
}

// A spec changed since the read (its generation moved on) refuses the
// patch.
func TestTheGatePatchIsRefusedOnASpecChangedSinceTheRead(t *testing.T) {
	n := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Generation: 3}}
	n.Spec.AddGate(v2alpha1.GateSequencer)
	patch, err := gatePatch(n, gateWrite{})
	require.NoError(t, err)
	data, err := patch.Data(n)
	require.NoError(t, err)
	ops, err := jsonpatch.DecodePatch(data)
	require.NoError(t, err)
	_, err = ops.Apply([]byte(`{"metadata":{"generation":4},"spec":{"rolloutGates":[{"name":"` + v2alpha1.GateSequencer + `"}]}}`))
	assert.Error(t, err)
}

// A patch is for the object it was planned on: a node or a pod made since
// under the same name — at the same generation, with the same gates — has
// another UID and refuses it. The release guard judges a pod that is not
// the current node's as nothing to judge, so a frozen sequencer's release
// of an earlier node's pod would otherwise go through.
func TestAGatePatchIsRefusedByAnObjectMadeSinceUnderItsName(t *testing.T) {
	gate := `[{"name":"` + v2alpha1.GateSequencer + `"}]`
	n := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Generation: 1, UID: "planned"}}
	n.Spec.AddGate(v2alpha1.GateSequencer)
	nodePatch, err := gatePatch(n, gateWrite{})
	require.NoError(t, err)
	podPatch, err := podGatePatch(rollout.Pod{Name: "acme-fe1-0", UID: "planned", Gates: []string{v2alpha1.GateSequencer}})
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		patch  client.Patch
		stored string
	}{
		{"a node patch", nodePatch, `{"metadata":{"generation":1,"uid":"%s"},"spec":{"rolloutGates":` + gate + `}}`},
		{"a pod patch", podPatch, `{"metadata":{"uid":"%s"},"spec":{"schedulingGates":` + gate + `}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := c.patch.Data(n)
			require.NoError(t, err)
			ops, err := jsonpatch.DecodePatch(data)
			require.NoError(t, err)
			_, err = ops.Apply(fmt.Appendf(nil, c.stored, "planned"))
			require.NoError(t, err, "applies to the object planned on")
			_, err = ops.Apply(fmt.Appendf(nil, c.stored, "made-since"))
			assert.Error(t, err, "refused by another of its name")
		})
	}
}

// A release of a node that runs its target Ready already records its own
// rollout converged, keyed as the release it makes (its UID and the
// generation the patch produces), beside what it relied on; a release of a
// node still to roll records what it relied on alone.
func TestAReleaseOfANodeRunningItsTargetReadyRecordsItsOwnRolloutConverged(t *testing.T) {
	for _, c := range []struct {
		name      string
		converged bool
		want      string
	}{
		{"released on what it runs Ready", true, `{"acme-be":"be-uid/3","acme-fe1":"fe1-uid/5"}`},
		{"released to roll", false, `{"acme-be":"be-uid/3"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Generation: 4, UID: "fe1-uid",
				Annotations: map[string]string{v2alpha1.AnnotationTargetHash: "h"}}}
			n.Spec.AddGate(v2alpha1.GateSequencer)
			patch, err := gatePatch(n, gateWrite{record: &releaseRecord{after: map[string]string{"acme-be": "be-uid/3"}, now: time.Now(), converged: c.converged}})
			require.NoError(t, err)
			data, err := patch.Data(n)
			require.NoError(t, err)
			ops, err := jsonpatch.DecodePatch(data)
			require.NoError(t, err)
			got, err := ops.Apply([]byte(`{"metadata":{"generation":4,"uid":"fe1-uid","annotations":{"` + v2alpha1.AnnotationTargetHash + `":"h"}},"spec":{"rolloutGates":[{"name":"` + v2alpha1.GateSequencer + `"}]}}`))
			require.NoError(t, err)
			var stored v2alpha1.Frontend
			require.NoError(t, json.Unmarshal(got, &stored))
			assert.JSONEq(t, c.want, stored.Annotations[v2alpha1.AnnotationReleasedAfter])
			assert.Equal(t, "5", stored.Annotations[v2alpha1.AnnotationReleasedGeneration])
		})
	}
}

// A release of a node with no annotations at all (one the webhook never
// stamped) writes the map whole: only onto the node as read, not over an
// annotation added since, which moves no generation.
func TestAReleaseOfANodeWithNoAnnotationsWritesThemOnlyOntoTheNodeAsRead(t *testing.T) {
	n := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Generation: 4, UID: "fe1-uid", ResourceVersion: "70"}}
	n.Spec.AddGate(v2alpha1.GateSequencer)
	patch, err := gatePatch(n, gateWrite{record: &releaseRecord{now: time.Now()}})
	require.NoError(t, err)
	data, err := patch.Data(n)
	require.NoError(t, err)
	ops, err := jsonpatch.DecodePatch(data)
	require.NoError(t, err)
	const gated = `"spec":{"rolloutGates":[{"name":"` + v2alpha1.GateSequencer + `"}]}`

	got, err := ops.Apply([]byte(`{"metadata":{"generation":4,"uid":"fe1-uid","resourceVersion":"70"},` + gated + `}`))
	require.NoError(t, err, "applies to the node as read")
	var stored v2alpha1.Frontend
	require.NoError(t, json.Unmarshal(got, &stored))
	assert.Equal(t, "5", stored.Annotations[v2alpha1.AnnotationReleasedGeneration])

	_, err = ops.Apply([]byte(`{"metadata":{"generation":4,"uid":"fe1-uid","resourceVersion":"71","annotations":{"team":"payments"}},` + gated + `}`))
	assert.Error(t, err, "refused where an annotation came since: the map would be written over it")
}
