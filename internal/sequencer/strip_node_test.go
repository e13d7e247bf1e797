package sequencer

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

func TestTheCacheKeepsOfANodeItsManifestsListsAndNotItsManagedFields(t *testing.T) {
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	n := &v2alpha1.Frontend{}
	n.SetName("acme-fe1")
	n.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "argocd-controller", Operation: metav1.ManagedFieldsOperationUpdate}})
	n.SetAnnotations(map[string]string{
		lastApplied:                   `{"spec":{"up":true,"image":{"repository":"express","tag":"e1"},"deploymentDependencies":{"upgradePrerequisites":[]}}}`,
		v2alpha1.AnnotationTargetHash: "h2",
	})
	n.Spec.DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: []v2alpha1.Prerequisite{}}

	out, err := StripNode(n)
	require.NoError(t, err)
	got := out.(*v2alpha1.Frontend)
	assert.Empty(t, got.GetManagedFields())
	assert.JSONEq(t, `{"spec":{"deploymentDependencies":{"upgradePrerequisites":null}}}`, got.GetAnnotations()[lastApplied])
	assert.Equal(t, "h2", got.GetAnnotations()[v2alpha1.AnnotationTargetHash])
	assert.NotNil(t, got.Spec.DeploymentDependencies.UpgradePrerequisites, "the spec is kept")

	other, err := StripNode("not a node")
	require.NoError(t, err)
	assert.Equal(t, "not a node", other, "what is not a node passes as it is")
}

// A node read fresh carries its rollout-history and last-applied manifest
// whole, the cache's copy cut: the condition write's retry takes them for
// the same node, and not one whose history moved in what the plan reads.
func TestANodeReadFreshIsAlikeAsThePlanReadsItToItsCutCopy(t *testing.T) {
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	record := `{"target":"h1","rolloutID":"r1","gated":"2026-12-02T10:00:01Z","released":"2026-12-02T10:00:02Z","ready":"2026-12-02T10:00:03Z","converged":true,"after":["acme-be"]}`
	fresh := map[string]string{
		lastApplied:                       `{"spec":{"image":"express:e1","deploymentDependencies":{"upgradePrerequisites":[]}}}`,
		v2alpha1.AnnotationRolloutHistory: "[" + record + "]",
		v2alpha1.AnnotationTargetHash:     "h2",
	}
	n := &v2alpha1.Frontend{}
	n.SetAnnotations(maps.Clone(fresh))
	out, err := StripNode(n)
	require.NoError(t, err)
	cached := out.(*v2alpha1.Frontend).GetAnnotations()
	require.NotEqual(t, fresh[v2alpha1.AnnotationRolloutHistory], cached[v2alpha1.AnnotationRolloutHistory], "the cache keeps the history cut")
	require.NotEqual(t, fresh[lastApplied], cached[lastApplied], "and the manifest")

	assert.True(t, sameAnnotations(fresh, cached), "the whole node and its cut copy")
	assert.Equal(t, "["+record+"]", fresh[v2alpha1.AnnotationRolloutHistory], "comparing cuts no caller's map")

	readyLater := maps.Clone(fresh)
	readyLater[v2alpha1.AnnotationRolloutHistory] = strings.Replace(fresh[v2alpha1.AnnotationRolloutHistory], "10:00:03Z", "10:00:09Z", 1)
	assert.False(t, sameAnnotations(readyLater, cached), "a history whose last record was Ready at another time")
	otherID := maps.Clone(fresh)
	otherID[v2alpha1.AnnotationRolloutHistory] = strings.Replace(fresh[v2alpha1.AnnotationRolloutHistory], `"r1"`, `"r9"`, 1)
	assert.True(t, sameAnnotations(otherID, cached), "a history that differs in what the plan does not read")
}

// Two nodes of a tenant, decoded apart, share in the cache one copy of
// each string both repeat, and keep every value as decoded.
func TestTheCacheKeepsOneCopyOfTheStringsNodesRepeat(t *testing.T) {
	decode := func(key string) *v2alpha1.Frontend {
		n := &v2alpha1.Frontend{}
		require.NoError(t, json.Unmarshal(storedNode(t, 7, key, 1), n))
		return n
	}
	fe1, fe2 := decode("fe1"), decode("fe2")
	cut := fe1.DeepCopy()
	rollout.CutForCache(cut.GetAnnotations())
	for _, n := range []*v2alpha1.Frontend{fe1, fe2} {
		_, err := StripNode(n)
		require.NoError(t, err)
	}
	assert.Equal(t, cut, fe1, "every value is kept as decoded")
	same := func(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }
	p1, p2 := fe1.Spec.DeploymentDependencies.UpgradePrerequisites[0], fe2.Spec.DeploymentDependencies.UpgradePrerequisites[0]
	assert.True(t, same(p1.ExpressNode, p2.ExpressNode), "a prerequisite's name")
	assert.True(t, same(p1.Kind, p2.Kind) && same(p1.PodConditionType, p2.PodConditionType) && same(p1.ConditionStatus, p2.ConditionStatus), "its kind and condition")
	assert.True(t, same(fe1.Annotations[v2alpha1.AnnotationRenderedNodes], fe2.Annotations[v2alpha1.AnnotationRenderedNodes]), "the tenant's rendered nodes")
	for k := range fe1.Annotations {
		for k2 := range fe2.Annotations {
			if k == k2 {
				assert.True(t, same(k, k2), "annotation key %s", k)
			}
		}
	}
	assert.True(t, same(fe1.Spec.ClusterConfig.ClusterName, fe2.Spec.ClusterConfig.ClusterName), "the tenant's name")
	assert.True(t, same(fe1.Status.Conditions[1].Reason, fe2.Status.Conditions[1].Reason), "a condition's reason")
}

// Two pods of a node, decoded apart, share in the cache one copy of what
// both repeat, and keep what is their own as decoded.
func TestTheCacheKeepsOneCopyOfTheStringsPodsRepeat(t *testing.T) {
	decode := func(name string) *corev1.Pod {
		raw := `{"metadata":{"name":"` + name + `","namespace":"tenant-0007","labels":{"express.medallia.com/node":"tenant-0007-fe1",` +
			`"controller-revision-hash":"tenant-0007-fe1-6d9f8c7b5","statefulset.kubernetes.io/pod-name":"` + name + `"},` +
			`"ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"tenant-0007-fe1","uid":"u1","controller":true}]},` +
			`"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-02T10:00:00Z"}]}}`
		p := &corev1.Pod{}
		require.NoError(t, json.Unmarshal([]byte(raw), p))
		out, err := stripPod(p)
		require.NoError(t, err)
		return out.(*cachedPod).pod()
	}
	p0, p1 := decode("tenant-0007-fe1-0"), decode("tenant-0007-fe1-1")
	same := func(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }
	assert.True(t, same(p0.Namespace, p1.Namespace), "the namespace")
	assert.True(t, same(p0.Labels[v2alpha1.LabelNode], p1.Labels[v2alpha1.LabelNode]), "the node's name")
	assert.True(t, same(p0.OwnerReferences[0].Name, p1.OwnerReferences[0].Name), "the StatefulSet's name")
	assert.True(t, same(string(p0.Status.Conditions[0].Type), string(p1.Status.Conditions[0].Type)), "a condition's type")
	assert.Equal(t, "tenant-0007-fe1-1", p1.Labels["statefulset.kubernetes.io/pod-name"], "what is the pod's own is kept")
	assert.Equal(t, "tenant-0007-fe1-6d9f8c7b5", p1.Labels["controller-revision-hash"])
}
