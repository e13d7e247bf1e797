package sequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
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
