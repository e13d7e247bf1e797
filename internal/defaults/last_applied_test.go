package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func TestAShrunkLastAppliedManifestDeclaresTheListsTheWholeOneDid(t *testing.T) {
	for _, row := range []struct {
		name, manifest string
		lists          bool
	}{
		{name: "a manifest that sets the provisioning list, with the operator's fields", lists: true,
			manifest: `{"apiVersion":"express.medallia.com/v2alpha1","kind":"Frontend","metadata":{"name":"acme-fe1"},"spec":{"up":true,"expressVersion":"e1","resources":{"cpu":"4"},"env":[{"name":"A","value":"b"}],"deploymentDependencies":{"provisioningPrerequisites":[{"expressNode":"acme-be","kind":"Backend"}]}}}`},
		{name: "a manifest that sets both lists, one empty", lists: true,
			manifest: `{"spec":{"deploymentDependencies":{"provisioningPrerequisites":[],"upgradePrerequisites":[{"expressNode":"acme-fe2"}]}}}`},
		{name: "a manifest that sets a list to null", lists: true,
			manifest: `{"spec":{"deploymentDependencies":{"upgradePrerequisites":null}}}`},
		{name: "a manifest that sets no list", manifest: `{"spec":{"up":true,"expressVersion":"e1"}}`},
		{name: "a manifest whose dependencies are null", manifest: `{"spec":{"deploymentDependencies":null}}`},
		{name: "a manifest that does not parse", manifest: `{"spec":`},
		{name: "an empty manifest", manifest: ``},
	} {
		t.Run(row.name, func(t *testing.T) {
			whole, shrunk := node("acme-fe1"), node("acme-fe1")
			whole.SetAnnotations(map[string]string{lastAppliedAnnotation: row.manifest, "other": "kept"})
			shrunk.SetAnnotations(map[string]string{lastAppliedAnnotation: row.manifest, "other": "kept"})
			ShrinkLastApplied(shrunk)

			for _, l := range Lists {
				assert.Equal(t, declared(whole, l), declared(shrunk, l), "%s declared", l)
			}
			assert.Equal(t, "kept", shrunk.GetAnnotations()["other"])
			got, has := shrunk.GetAnnotations()[lastAppliedAnnotation]
			require.True(t, has, "the annotation stays")
			assert.NotContains(t, got, "resources")
			assert.NotContains(t, got, "acme-be", "the lists' items are not kept")
			if !row.lists {
				assert.Equal(t, "{}", got)
			}
			again := shrunk.DeepCopyObject().(v2alpha1.Node)
			ShrinkLastApplied(again)
			assert.Equal(t, shrunk.GetAnnotations(), again.GetAnnotations(), "shrinking again changes nothing")
		})
	}
	t.Run("a node with no manifest is left as it is", func(t *testing.T) {
		n := node("acme-fe1")
		n.SetAnnotations(map[string]string{"other": "kept"})
		ShrinkLastApplied(n)
		assert.Equal(t, map[string]string{"other": "kept"}, n.GetAnnotations())
	})
}
