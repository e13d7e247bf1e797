package chart

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/test/framework/argocd"
	"github.com/medallia/express-sequencer/test/framework/tenantchart"
)

// What Argo CD compares for the tenant chart, with express-sequencer's
// webhooks in the API server: the chart rendered for each kind of values,
// applied with kubectl apply as Argo CD syncs (and again with a change),
// then diffed by Argo CD's own code — its default three-way diff and its
// server-side diff (a real server-side apply dry run through the webhooks,
// as manager argocd-controller), with and without the webhooks' mutations
// (compare option IncludeMutationWebhook). Nothing the webhooks inject or
// the API server defaults may show: no permanent OutOfSync, and no
// ignoreDifferences needed.
func TestArgoCDSeesNoDifferenceOnTheTenantChart(t *testing.T) {
	for _, values := range []string{"", "version-override-values.yaml", "node-down-values.yaml", "disable-dependencies-values.yaml",
		"per-node-disable-values.yaml", "explicit-prerequisite-values.yaml"} {
		t.Run("values "+values, func(t *testing.T) {
			ns := newNamespace(t)
			var files []string
			if values != "" {
				files = append(files, filepath.Join(tenantchart.Dir(), "ci", values))
			}
			sync := func(overrides map[string]any) []*unstructured.Unstructured {
				overrides["namespace"] = ns
				manifests, _, err := tenantchart.Render(overrides, files...)
				require.NoError(t, err)
				desired := trackedByArgoCD(t, manifests)
				kubectlApply(t, desired)
				return desired
			}
			desired := sync(map[string]any{})
			assertInSync(t, desired)
			assertOnlyDocumentedFieldsAdded(t, desired)
			// Released as the sequencer releases (its release record), then
			// changed: the change keeps the released rollout in the
			// rollout-history. Diffed again, with all of it stored.
			releaseAsTheSequencer(t, desired)
			assertInSync(t, desired)
			targets := map[string]string{}
			for _, d := range desired {
				targets[d.GetName()] = liveOf(t, d).GetAnnotations()[v2alpha1.AnnotationTargetHash]
			}
			desired = sync(map[string]any{"expressVersion": map[string]any{"Backend": "express-e689.154", "Frontend": "express-e689.154"}})
			assertInSync(t, desired)
			assertOnlyDocumentedFieldsAdded(t, desired)
			releaseAsTheSequencer(t, desired)
			assertInSync(t, desired)
			assertOnlyDocumentedFieldsAdded(t, desired)
			kept := 0
			for _, d := range desired {
				if live := liveOf(t, d); nodeUp(live) && live.GetAnnotations()[v2alpha1.AnnotationTargetHash] != targets[d.GetName()] {
					assert.Contains(t, live.GetAnnotations(), v2alpha1.AnnotationRolloutHistory, "%s: the released rollout the change replaced is kept", d.GetName())
					kept++
				}
			}
			assert.Positive(t, kept, "the change replaced released rollouts")
		})
	}
}

// The same diffs do see a change made behind Argo CD's back.
func TestArgoCDSeesAChangeMadeOutsideIt(t *testing.T) {
	ns := newNamespace(t)
	manifests, _, err := tenantchart.Render(map[string]any{"namespace": ns})
	require.NoError(t, err)
	desired := trackedByArgoCD(t, manifests)
	kubectlApply(t, desired)
	fe1 := v2alpha1.NewNode(v2alpha1.KindFrontend)
	fe1.SetNamespace(ns)
	fe1.SetName("acme-fe1")
	require.NoError(t, harness.Client.Patch(context.Background(), fe1, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"expressVersion":"express-hotfix"}}`))))
	for _, d := range desired {
		if d.GetName() != "acme-fe1" {
			continue
		}
		live := liveOf(t, d)
		modified, paths, err := argocd.Diff(d, live, nil)
		require.NoError(t, err)
		assert.True(t, modified)
		assert.Equal(t, []string{"/spec/expressVersion"}, paths)
		for _, withWebhooks := range []bool{false, true} {
			modified, paths, err := argocd.ServerSideDiff(d, live, nil, kubeconfig(t), "argocd-controller", withWebhooks)
			require.NoError(t, err)
			assert.True(t, modified, "the server-side diff, webhook mutations kept: %v", withWebhooks)
			assert.Contains(t, paths, "/spec/expressVersion")
		}
	}
}

// injectedFields are the fields of a Backend/Frontend that express-sequencer
// writes and a chart never renders — the annotations the webhook and the
// sequencer own, as the code lists them, and two spec fields — as
// docs/argocd.md must list them for tools that compare whole objects.
var injectedFields = func() []string {
	var out []string
	for _, key := range append(slices.Clone(rollout.WebhookOnly), rollout.SequencerOnly...) {
		out = append(out, "/metadata/annotations/"+strings.ReplaceAll(key, "/", "~1"))
	}
	return append(out, "/spec/rolloutGates", "/spec/deploymentDependencies")
}()

// Between what was rendered and what is stored, only the documented fields
// differ (metadata the API server owns and status aside), and the list in
// the docs is this one.
func assertOnlyDocumentedFieldsAdded(t *testing.T, desired []*unstructured.Unstructured) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(tenantchart.Dir(), "..", "..", "docs", "argocd.md"))
	require.NoError(t, err)
	for _, f := range injectedFields {
		assert.Contains(t, string(doc), "`"+f+"`", "docs/argocd.md lists %s", f)
	}
	for _, d := range desired {
		live := liveOf(t, d).Object
		unstructured.RemoveNestedField(live, "status")
		for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
			unstructured.RemoveNestedField(live, "metadata", f)
		}
		unstructured.RemoveNestedField(live, "metadata", "annotations", corev1.LastAppliedConfigAnnotation)
		seen := false
		for _, path := range argocd.Differences(d.Object, live) {
			documented := false
			for _, f := range injectedFields {
				documented = documented || path == f || strings.HasPrefix(path, f+"/")
			}
			assert.True(t, documented, "%s: %s differs from what was rendered and is not documented", d.GetName(), path)
			seen = seen || path == injectedFields[0]
		}
		assert.True(t, seen, "%s: the target hash is stamped", d.GetName())

		// The documented ignoreDifferences leave only the prerequisite lists.
		u := &unstructured.Unstructured{Object: live}
		require.NoError(t, argocd.Normalize(u, []argocd.Ignore{{Group: v2alpha1.GroupVersion.Group, Kind: d.GetKind(), JQPathExpressions: documentedIgnores}}))
		for _, path := range argocd.Differences(d.Object, u.Object) {
			assert.True(t, strings.HasPrefix(path, "/spec/deploymentDependencies"), "%s: %s is left after the documented ignoreDifferences", d.GetName(), path)
		}
	}
	for _, expr := range documentedIgnores {
		assert.Contains(t, string(doc), "    - "+expr+"\n", "docs/argocd.md shows %s", expr)
	}
}

// documentedIgnores are the jq path expressions docs/argocd.md must give:
// every injected field but the prerequisite lists.
var documentedIgnores = func() []string {
	out := []string{`.spec.rolloutGates`}
	for _, key := range append(slices.Clone(rollout.WebhookOnly), rollout.SequencerOnly...) {
		out = append(out, `.metadata.annotations["`+key+`"]`)
	}
	return out
}()

func assertInSync(t *testing.T, desired []*unstructured.Unstructured) {
	t.Helper()
	for _, d := range desired {
		live := liveOf(t, d)
		modified, paths, err := argocd.Diff(d, live, nil)
		require.NoError(t, err)
		assert.False(t, modified, "%s: the three-way diff shows %v", d.GetName(), paths)
		for _, withWebhooks := range []bool{false, true} {
			modified, paths, err := argocd.ServerSideDiff(d, live, nil, kubeconfig(t), "argocd-controller", withWebhooks)
			require.NoError(t, err)
			assert.False(t, modified, "%s: the server-side diff (webhook mutations kept: %v) shows %v", d.GetName(), withWebhooks, paths)
		}
	}
}

// releaseAsTheSequencer removes the sequencer's gate from each gated node
// of desired with the release record the sequencer writes, as the
// sequencer's identity and field manager (the suite runs no sequencer).
func releaseAsTheSequencer(t *testing.T, desired []*unstructured.Unstructured) {
	t.Helper()
	for _, d := range desired {
		live := liveOf(t, d)
		gates, _, _ := unstructured.NestedSlice(live.Object, "spec", "rolloutGates")
		if len(gates) == 0 {
			continue
		}
		ann := live.GetAnnotations()
		patch, err := json.Marshal(map[string]any{
			"spec": map[string]any{"rolloutGates": nil},
			"metadata": map[string]any{"annotations": map[string]string{
				v2alpha1.AnnotationReleasedTarget:     ann[v2alpha1.AnnotationTargetHash],
				v2alpha1.AnnotationReleasedGeneration: strconv.FormatInt(live.GetGeneration()+1, 10),
				v2alpha1.AnnotationReleasedAt:         time.Now().UTC().Format(time.RFC3339Nano),
				v2alpha1.AnnotationReleasedAfter:      `{"acme-be":"uid/1"}`,
			}},
		})
		require.NoError(t, err)
		require.NoError(t, harness.Client.Patch(context.Background(), live, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v2alpha1.FieldManager)))
		assert.Equal(t, ann[v2alpha1.AnnotationTargetHash], live.GetAnnotations()[v2alpha1.AnnotationReleasedTarget], "%s: released as the sequencer", d.GetName())
	}
}

// nodeUp reports whether a stored node is up.
func nodeUp(u *unstructured.Unstructured) bool {
	up, found, _ := unstructured.NestedBool(u.Object, "spec", "up")
	return !found || up
}

// kubeconfig is a kubeconfig file for the suite's API server.
func kubeconfig(t *testing.T) string {
	t.Helper()
	path, err := harness.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	return path
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "argocd-diff-"}}
	require.NoError(t, harness.Client.Create(context.Background(), ns))
	return ns.Name
}

// trackedByArgoCD decodes the manifests and adds the tracking annotation
// Argo CD adds to every resource it syncs.
func trackedByArgoCD(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifests, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		if len(u.Object) == 0 {
			continue
		}
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["argocd.argoproj.io/tracking-id"] = "acme:express.medallia.com/" + u.GetKind() + ":" + u.GetNamespace() + "/" + u.GetName()
		u.SetAnnotations(a)
		out = append(out, u)
	}
	require.NotEmpty(t, out)
	return out
}

// kubectlApply applies the objects with the real kubectl, as Argo CD's
// default (client-side) sync does: it leaves last-applied-configuration.
func kubectlApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		docs = append(docs, string(b))
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tenant.yaml")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(docs, "---\n")), 0o600))
	kubeconfig, err := harness.KubeconfigFile(dir)
	require.NoError(t, err)
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	out, err := exec.Command(bin, "--kubeconfig", kubeconfig, "apply", "-f", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func liveOf(t *testing.T, desired *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(desired), live))
	return live
}
