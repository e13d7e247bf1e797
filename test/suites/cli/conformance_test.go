package cli

import (
	"context"
	"encoding/xml"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/conformance"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// kubectl express conformance against a live cluster where the Express
// operator (here the test operator) and express-sequencer run: the clauses
// asked for run, progress goes to standard error, the report comes as YAML
// or JUnit, and a clause the kit does not know is refused naming those it
// does.
func TestConformanceChecksTheClustersOperatorAndReportsEachClause(t *testing.T) {
	h := full.Get(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "conformance-"}}
	require.NoError(t, h.Client.Create(context.Background(), ns))
	kubeconfig, err := h.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	args := []string{"conformance", "--kubeconfig", kubeconfig, "-n", ns.Name, "--hold-window", "2s",
		"--unacted-field", controlplane.PreservedField + ".conformanceProbe", "--implementation", "expressoperator"}

	out, errOut, err := express(t, append(args, "--clause", "gates-hold,up-false", "-o", "yaml")...)
	require.NoError(t, err, errOut)
	var report conformance.Report
	require.NoError(t, yaml.Unmarshal([]byte(out), &report), out)
	assert.Equal(t, conformance.Summary{Result: conformance.RunSuccess, Passed: 2}, report.Summary, out)
	assert.Equal(t, conformance.ModeWithSequencer, report.Mode)
	assert.Equal(t, "expressoperator", report.Implementation.Project)
	assert.Contains(t, errOut, "gates-hold: passed")
	assert.Contains(t, errOut, "up-false: passed")

	out, errOut, err = express(t, append(args, "--clause", "statefulset", "-o", "junit")...)
	require.NoError(t, err, errOut)
	var suites struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal([]byte(out), &suites), out)
	require.Len(t, suites.Suites, 1)
	assert.Equal(t, 1, suites.Suites[0].Tests)
	assert.Equal(t, 0, suites.Suites[0].Failures)
	assert.Equal(t, "statefulset", suites.Suites[0].Cases[0].Name)

	out, _, err = express(t, append(args, "--clause", "failing-pods", "-o", "yaml")...)
	require.NoError(t, err, "a partial run ends well by default")
	assert.Contains(t, out, "result: partial", "skipped without --failing-version")
	_, _, err = express(t, append(args, "--clause", "failing-pods", "--require-all")...)
	assert.ErrorContains(t, err, "some clauses were skipped (--require-all)")

	_, _, err = express(t, append(args, "--clause", "no-such")...)
	assert.ErrorContains(t, err, `no clause "no-such": the clauses are crd-fields, gates-hold`)
	_, _, err = express(t, "conformance", "--kubeconfig", kubeconfig)
	assert.ErrorContains(t, err, "give the scratch namespace the kit may create its nodes in: --namespace (-n)")
}
