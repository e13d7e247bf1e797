package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Every reason of a node that does not go on by itself (the fleet view's
// "stuck", a Warning Event) fires an alert, counts as stuck on the
// dashboard, and is Degraded in Argo CD: a new one added to the code and
// forgotten in any of them fails here.
func TestEveryStuckReasonAlertsCountsAsStuckAndIsDegradedInArgoCD(t *testing.T) {
	h := chart(t, map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	rule := string(h["PrometheusRule"]["express-sequencer"])
	require.NotEmpty(t, rule)
	dashboard, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "grafana", "express-sequencer-dashboard.json"))
	require.NoError(t, err)
	lua, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "argocd", "health.lua"))
	require.NoError(t, err)
	degraded := regexp.MustCompile(`local degraded = \{([^}]*)\}`).FindSubmatch(lua)
	require.NotNil(t, degraded, "health.lua has its table of Degraded reasons")
	alerted := regexp.MustCompile(`express_sequencer_nodes\{reason=~?\\?"([A-Za-z|]+)\\?"\}`)
	reasons := rollout.StuckReasons()
	require.NotEmpty(t, reasons)
	for _, reason := range reasons {
		assert.True(t, anyNames(alerted.FindAllStringSubmatch(rule, -1), reason), "the PrometheusRule alerts on %s", reason)
		assert.True(t, anyNames(alerted.FindAllStringSubmatch(string(dashboard), -1), reason), "the dashboard counts %s as stuck", reason)
		assert.Regexp(t, `\b`+reason+` = true\b`, string(degraded[1]), "Argo CD shows %s as Degraded", reason)
	}
}

// anyNames reports whether one of the matched reason selectors names
// reason among its alternatives.
func anyNames(matches [][]string, reason string) bool {
	for _, m := range matches {
		if regexp.MustCompile(`(^|\|)` + reason + `(\||$)`).MatchString(m[1]) {
			return true
		}
	}
	return false
}
