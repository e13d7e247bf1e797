package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// seedManifest is the user's tenant rendered by the chart without
// allNodeConfig: no deploymentDependencies anywhere.
const seedManifest = `
apiVersion: express.medallia.com/v2alpha1
kind: Backend
metadata:
  name: acme-be
  labels: {express.medallia.com/source-deployer: argocd}
spec:
  clusterConfig: {clusterName: acme, tenantID: "123634", tenantName: acme}
  expressVersion: express-e689.151
  configChangeset: 867fc47c2326a5b00893b3b0f3d2d7c66b634579
---
apiVersion: express.medallia.com/v2alpha1
kind: Frontend
metadata:
  name: acme-fe1
spec:
  clusterConfig: {clusterName: acme, tenantID: "123634", tenantName: acme}
  expressVersion: express-e689.154
  configChangeset: 867fc47c2326a5b00893b3b0f3d2d7c66b634579
---
apiVersion: express.medallia.com/v2alpha1
kind: Frontend
metadata:
  name: acme-fe2
spec:
  clusterConfig: {clusterName: acme, tenantID: "123634", tenantName: acme}
  expressVersion: express-e689.151
  configChangeset: 867fc47c2326a5b00893b3b0f3d2d7c66b634579
`

func writeManifest(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tenant.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestKubectlServerSideDryRunShowsTheInjectedDefaultsAndStoresNothing(t *testing.T) {
	ns := namespace(t)
	file := writeManifest(t, seedManifest)

	out, err := kubectl(t, "apply", "--dry-run=server", "-o", "yaml", "-n", ns, "-f", file)
	require.NoError(t, err, out)
	for _, want := range []string{
		"provisioningPrerequisites:", "upgradePrerequisites:",
		"expressNode: acme-be", "expressNode: acme-fe1", "expressNode: acme-fe2",
		"podConditionType: Ready", "- name: express.medallia.com/sequencer",
		v2alpha1.AnnotationDefaultedPrerequisites,
	} {
		assert.Contains(t, out, want)
	}

	out, err = kubectl(t, "get", "backends,frontends", "-n", ns)
	require.NoError(t, err, out)
	assert.Contains(t, out, "No resources found", "a server-side dry run stores nothing")

	out, err = kubectl(t, "apply", "-n", ns, "-f", file)
	require.NoError(t, err, out)
	assert.Contains(t, out, "frontend.express.medallia.com/acme-fe2 created")

	out, err = kubectl(t, "get", "frontend", "acme-fe2", "-n", ns, "-o", "json")
	require.NoError(t, err, out)
	var fe2 v2alpha1.Frontend
	require.NoError(t, json.Unmarshal([]byte(out), &fe2))
	assert.Equal(t, "acme-fe1", fe2.Spec.DeploymentDependencies.ProvisioningPrerequisites[0].ExpressNode)
	assert.Equal(t, "acme-fe1", fe2.Spec.DeploymentDependencies.UpgradePrerequisites[0].ExpressNode)
	assert.True(t, fe2.Spec.HasGate(v2alpha1.GateSequencer))

	out, err = kubectl(t, "get", "frontends", "-n", ns)
	require.NoError(t, err, out)
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	assert.Equal(t, []string{"NAME", "VERSION", "UP", "GATED", "PREREQUISITES", "AGE"}, header)
	assert.Contains(t, out, "express-e689.154")

	out, err = kubectl(t, "apply", "-n", ns, "-f", file)
	require.NoError(t, err, out)
	assert.Contains(t, out, "frontend.express.medallia.com/acme-fe2 unchanged", "re-applying is a no-op")
}

func TestKubectlShowsACyclicManifestRefusedWithTheCycle(t *testing.T) {
	ns := namespace(t)
	fe1 := `
apiVersion: express.medallia.com/v2alpha1
kind: Frontend
metadata:
  name: acme-fe1
spec:
  clusterConfig: {clusterName: acme}
  deploymentDependencies:
    upgradePrerequisites:
    - {expressNode: acme-fe2, kind: Frontend, podConditionType: Ready, conditionStatus: "True"}
`
	out, err := kubectl(t, "apply", "-n", ns, "-f", writeManifest(t, fe1))
	require.NoError(t, err, out)
	assert.Contains(t, out, "Frontend acme-fe2 does not exist yet", "kubectl shows the admission warning")

	stored := &v2alpha1.Frontend{}
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "acme-fe1"}, stored))
	storedAt, err := strconv.ParseUint(stored.ResourceVersion, 10, 64)
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the validating webhook reads siblings from its cache
		cached := &v2alpha1.Frontend{}
		if err := harness.Manager.GetClient().Get(context.Background(), client.ObjectKeyFromObject(stored), cached); err != nil {
			return false
		}
		// As stored, or written since (the sequencer's condition): a cache
		// that skips past the stored version between two looks has it too.
		at, err := strconv.ParseUint(cached.ResourceVersion, 10, 64)
		return err == nil && at >= storedAt
	}, 60*time.Second, 20*time.Millisecond, "the manager's cache never saw acme-fe1 as stored (under the load of the other suites it once took more than 10 s, and once more than 30 s)")

	fe2 := `
apiVersion: express.medallia.com/v2alpha1
kind: Frontend
metadata:
  name: acme-fe2
spec:
  clusterConfig: {clusterName: acme}
  deploymentDependencies:
    upgradePrerequisites:
    - {expressNode: acme-fe1, kind: Frontend, podConditionType: Ready, conditionStatus: "True"}
`
	out, err = kubectl(t, "apply", "-n", ns, "-f", writeManifest(t, fe1+"---"+fe2))
	require.Error(t, err, out)
	assert.Contains(t, out, `spec.deploymentDependencies.upgradePrerequisites[0].expressNode: Invalid value: "acme-fe1": acme-fe2 → acme-fe1 → acme-fe2 is a cycle`)

	out, err = kubectl(t, "get", "frontend", "acme-fe2", "-n", ns)
	require.Error(t, err, out)
	assert.Contains(t, out, "NotFound")
}

func TestKubectlPrintsTheWarningOfACycleThroughTheDefaultOrder(t *testing.T) {
	ns := namespace(t)
	node := func(kind, key, upgrade string) string {
		m := fmt.Sprintf(`
apiVersion: express.medallia.com/v2alpha1
kind: %s
metadata:
  name: acme-%s
spec:
  clusterConfig: {clusterName: acme}
  expressVersion: express-e689.151
`, kind, key)
		if upgrade != "" {
			m += fmt.Sprintf(`  deploymentDependencies:
    upgradePrerequisites:
    - {expressNode: %s, kind: Frontend, podConditionType: Ready, conditionStatus: "True"}
`, upgrade)
		}
		return m
	}
	tenant := node("Backend", "be", "") + "---" + node("Frontend", "fe1", "") + "---" + node("Frontend", "fe2", "") + "---" + node("Frontend", "fe3", "")
	out, err := kubectl(t, "apply", "-n", ns, "-f", writeManifest(t, tenant))
	require.NoError(t, err, out)
	require.Eventually(t, func() bool { // the validating webhook reads siblings from its cache
		var fes v2alpha1.FrontendList
		return harness.Manager.GetClient().List(context.Background(), &fes, client.InNamespace(ns)) == nil && len(fes.Items) == 3
	}, 60*time.Second, 20*time.Millisecond, "the manager's cache never saw the three Frontends (under the load of the other suites a cache once took more than 30 s)")

	out, err = kubectl(t, "apply", "-n", ns, "-f", writeManifest(t, node("Backend", "be", "acme-fe3")))
	require.NoError(t, err, out)
	assert.Contains(t, out, "acme-be → acme-fe3 → acme-be is a cycle (acme-fe3 → acme-be by the default order)",
		"kubectl prints the admission warning that spells the cycle")
}
