package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// The rollout target is the whole raw spec as admitted (DESIGN v2 §2).

const extendedBackend = `{
  "apiVersion": "express.medallia.com/v2alpha1", "kind": "Backend",
  "metadata": {"name": "acme-be"},
  "spec": {
    "clusterConfig": {"clusterName": "acme"},
    "expressVersion": "express-e689.151",
    "resources": {"replicas": 3, "requests": {"cpu": "500m", "memory": "2Gi"}},
    "extensions": {"jvm": {"flags": ["-Xmx4g", "-XX:+UseZGC"], "ratio": 0.75, "nested": {"deep": [{"a": 1}, {"b": null}]}}},
    "sidecars": [{"name": "log", "image": "fluent:1.2", "env": [{"name": "LEVEL", "value": "info"}], "ports": [24224, 9880]}],
    "nodeSelector": {"topology.kubernetes.io/zone": "den-a", "express.medallia.com/pool": "fe"},
    "maxSurge": "25%",
    "maintenance": {"enabled": false, "window": {"start": "02:00", "end": "04:00"}}
  }
}`

func unstructuredBackend(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal([]byte(extendedBackend), &u.Object))
	u.SetNamespace(ns)
	return u
}

func getUnstructured(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v2alpha1.GroupVersion.String())
	u.SetKind(v2alpha1.KindBackend)
	require.NoError(t, env(t).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "acme-be"}, u))
	return u
}

func TestFieldsTheGoTypesDoNotModelSurviveAdmissionAndArePartOfTheTarget(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	sent := unstructuredBackend(t, ns)
	require.NoError(t, c.Create(ctx, sent.DeepCopy()))

	stored := getUnstructured(t, ns)
	assertUnmodelledFieldsKept(t, sent, stored, "create")
	spec, _ := json.Marshal(stored.Object["spec"])
	hash, err := rollout.TargetHash(spec)
	require.NoError(t, err)
	assert.Equal(t, hash, stored.GetAnnotations()[v2alpha1.AnnotationTargetHash], "the hash covers the stored spec, unmodelled fields included")

	releaseUnstructured(t, ns)
	t.Run("a change to a field only the Express CRD knows is a target change", func(t *testing.T) {
		patch := `{"spec":{"extensions":{"jvm":{"ratio":0.5}}}}`
		require.NoError(t, c.Patch(ctx, getUnstructured(t, ns), client.RawPatch(types.MergePatchType, []byte(patch))))
		after := getUnstructured(t, ns)
		assert.NotEqual(t, hash, after.GetAnnotations()[v2alpha1.AnnotationTargetHash])
		assert.True(t, v2alpha1.IsGated(typed(t, after)), "gated for the new target")
		flags, _, _ := unstructured.NestedStringSlice(after.Object, "spec", controlplane.PreservedField, "jvm", "flags")
		assert.Equal(t, []string{"-Xmx4g", "-XX:+UseZGC"}, flags, "the rest of the subtree is untouched")
	})
	t.Run("key order and formatting are no target change", func(t *testing.T) {
		releaseUnstructured(t, ns)
		before := getUnstructured(t, ns)
		raw, err := json.MarshalIndent(before.Object, "", "    ")
		require.NoError(t, err)
		reordered := &unstructured.Unstructured{}
		require.NoError(t, json.Unmarshal(raw, &reordered.Object))
		require.NoError(t, c.Update(ctx, reordered))
		assert.False(t, v2alpha1.IsGated(typed(t, getUnstructured(t, ns))))
	})
}

var unmodelledFields = []string{controlplane.UnmodelledField, controlplane.PreservedField, controlplane.SidecarsField,
	controlplane.NodeSelectorField, controlplane.MaxSurgeField, controlplane.MaintenanceField}

// assertUnmodelledFieldsKept checks that every field the Go types do not
// model is what was sent, value for value.
func assertUnmodelledFieldsKept(t *testing.T, sent, got *unstructured.Unstructured, how string) {
	t.Helper()
	for _, field := range unmodelledFields {
		want, ok, _ := unstructured.NestedFieldNoCopy(sent.Object, "spec", field)
		require.True(t, ok, "the test sends spec.%s", field)
		have, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", field)
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(have)
		assert.JSONEq(t, string(wantJSON), string(gotJSON), "spec.%s survives admission (%s)", field, how)
	}
}

// A server-side dry run — kubectl apply --dry-run=server — goes through the
// webhooks: it shows what they inject, keeps every field the Go types do not
// model, and stores nothing.
func TestADryRunShowsWhatAdmissionInjectsAndKeepsEveryField(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	sent := unstructuredBackend(t, ns)
	created := sent.DeepCopy()
	require.NoError(t, c.Create(ctx, created, client.DryRunAll))
	assertUnmodelledFieldsKept(t, sent, created, "dry-run create")
	assert.NotEmpty(t, created.GetAnnotations()[v2alpha1.AnnotationTargetHash], "stamped")
	deps, ok, _ := unstructured.NestedMap(created.Object, "spec", "deploymentDependencies")
	assert.True(t, ok && deps["upgradePrerequisites"] != nil, "defaults injected: %v", deps)
	assert.True(t, v2alpha1.IsGated(typed(t, created)), "gated")
	err := c.Get(ctx, client.ObjectKeyFromObject(sent), &unstructured.Unstructured{Object: map[string]any{"apiVersion": sent.GetAPIVersion(), "kind": sent.GetKind()}})
	assert.True(t, apierrors.IsNotFound(err), "nothing stored: %v", err)

	require.NoError(t, c.Create(ctx, sent.DeepCopy()))
	releaseUnstructured(t, ns)
	changed := getUnstructured(t, ns)
	require.NoError(t, unstructured.SetNestedField(changed.Object, "30%", "spec", controlplane.MaxSurgeField))
	want := changed.DeepCopy()
	require.NoError(t, c.Update(ctx, changed, client.DryRunAll))
	assertUnmodelledFieldsKept(t, want, changed, "dry-run update")
	assert.True(t, v2alpha1.IsGated(typed(t, changed)), "a change to an unmodelled field is a target change")
	assert.False(t, v2alpha1.IsGated(typed(t, getUnstructured(t, ns))), "nothing stored")

	require.NoError(t, c.Update(ctx, want.DeepCopy()))
	assertUnmodelledFieldsKept(t, want, getUnstructured(t, ns), "update")
}

func releaseUnstructured(t *testing.T, ns string) {
	t.Helper()
	n := &v2alpha1.Backend{}
	require.NoError(t, env(t).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "acme-be"}, n))
	patch := `[{"op":"remove","path":"/spec/rolloutGates"}]`
	require.NoError(t, env(t).Client.Patch(context.Background(), n, client.RawPatch(types.JSONPatchType, []byte(patch)), client.FieldOwner(v2alpha1.FieldManager)))
}

func typed(t *testing.T, u *unstructured.Unstructured) v2alpha1.Node {
	t.Helper()
	n := &v2alpha1.Backend{}
	require.NoError(t, json.Unmarshal(must(json.Marshal(u.Object)), n))
	return n
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestAUserCannotReleaseANodeEarlyByWritingItsAnnotations(t *testing.T) {
	ctx := context.Background()
	wc, w := warningClient(t)
	ns := namespace(t)
	n := seedNode(ns, "fe1")
	require.NoError(t, wc.Create(ctx, n))
	hash := get(t, n).GetAnnotations()[v2alpha1.AnnotationTargetHash]
	require.NotEmpty(t, hash)

	t.Run("a hand-written target-hash is overwritten", func(t *testing.T) {
		n := get(t, n)
		n.GetAnnotations()[v2alpha1.AnnotationTargetHash] = "0000000000000000"
		require.NoError(t, wc.Update(ctx, n))
		assert.Equal(t, hash, get(t, n).GetAnnotations()[v2alpha1.AnnotationTargetHash])
		assert.True(t, v2alpha1.IsGated(get(t, n)), "still gated")
	})
	t.Run("a hand-written released-target is dropped with a warning", func(t *testing.T) {
		n := get(t, n)
		n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] = hash
		n.GetAnnotations()[v2alpha1.AnnotationReleasedGeneration] = "99"
		require.NoError(t, wc.Update(ctx, n))
		stored := get(t, n)
		assert.NotContains(t, stored.GetAnnotations(), v2alpha1.AnnotationReleasedTarget)
		assert.NotContains(t, stored.GetAnnotations(), v2alpha1.AnnotationReleasedGeneration)
		assert.True(t, v2alpha1.IsGated(stored), "still gated")
		assert.Contains(t, w.all(), "annotation express.medallia.com/released-target is written by express-sequencer only: the change was dropped")
	})
	t.Run("a gate removed by hand is put back, pointing at the escape hatch", func(t *testing.T) {
		n := get(t, n)
		n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
		require.NoError(t, wc.Update(ctx, n))
		assert.True(t, v2alpha1.IsGated(get(t, n)))
		assert.True(t, containsSubstring(w.all(), "annotate it express.medallia.com/ignore-prerequisites=true"), w.all())
	})
}

func TestANodeThatPredatesTheSequencerIsAdoptedNotRolledAgain(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	n := seedNode(namespace(t), "fe1")
	require.NoError(t, env(t).CreateWithoutMutation(ctx, n)) // stored before express-sequencer was installed
	require.Empty(t, get(t, n).GetAnnotations())

	stored := get(t, n)
	stored.SetLabels(map[string]string{"team": "express"})
	require.NoError(t, c.Update(ctx, stored))
	adopted := get(t, n)
	assert.False(t, v2alpha1.IsGated(adopted), "no new target, no gate")
	assert.Equal(t, adopted.GetAnnotations()[v2alpha1.AnnotationTargetHash], adopted.GetAnnotations()[v2alpha1.AnnotationReleasedTarget],
		"its running target is recorded as released")
}

func containsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Only express-sequencer's own identity may remove its gate: claiming its
// field manager is not enough.
func TestAnotherIdentityClaimingTheSequencersFieldManagerCannotRelease(t *testing.T) {
	ctx := context.Background()
	h := env(t)
	user, err := h.Env.AddUser(envtest.User{Name: "mallory", Groups: []string{"system:masters"}}, h.Config)
	require.NoError(t, err)
	cfg := user.Config()
	w := &warnings{}
	cfg.WarningHandler = w
	mallory, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)

	n := seedNode(namespace(t), "fe1")
	require.NoError(t, h.Client.Create(ctx, n))
	stored := get(t, n)
	base := stored.DeepCopyObject().(v2alpha1.Node)
	stored.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	stored.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] = stored.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	require.NoError(t, mallory.Patch(ctx, stored, client.MergeFrom(base), client.FieldOwner(v2alpha1.FieldManager)))

	after := get(t, n)
	assert.True(t, v2alpha1.IsGated(after), "the gate is put back")
	assert.NotContains(t, after.GetAnnotations(), v2alpha1.AnnotationReleasedTarget, "no release is recorded")
	assert.Contains(t, w.all(), "mallory is not express-sequencer's identity: field manager express-sequencer gives it no right to release a node")
}
