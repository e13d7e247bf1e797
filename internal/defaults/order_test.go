package defaults

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func keys(t *testing.T, s string) []Key {
	t.Helper()
	var out []Key
	for _, f := range strings.Fields(s) {
		k, err := ParseKey(f)
		require.NoError(t, err)
		out = append(out, k)
	}
	return out
}

func render(ks []Key) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = k.String()
	}
	return strings.Join(s, " ")
}

func tenant(n int) []Key {
	ks := []Key{Backend}
	for i := 1; i < n; i++ {
		ks = append(ks, FrontendKey(i))
	}
	return ks
}

func TestBuiltinSequences(t *testing.T) {
	o := Builtin()
	var fe40prov, fe40upg []string
	for i := 1; i <= 39; i++ {
		fe40prov = append(fe40prov, fmt.Sprintf("fe%d", i))
		if i >= 3 {
			fe40upg = append(fe40upg, fmt.Sprintf("fe%d", i))
		}
	}
	cases := []struct {
		name               string
		nodes              []Key
		provision, upgrade string
	}{
		{"a tenant of one node is just its backend", tenant(1), "be", "be"},
		{"a tenant of two nodes provisions the backend first and upgrades the frontend first", tenant(2), "be fe1", "fe1 be"},
		{"a tenant of three nodes upgrades both frontends before the backend", tenant(3), "be fe1 fe2", "fe1 fe2 be"},
		{"the seed tenant of five nodes follows the chart's allNodeConfig", tenant(5), "be fe1 fe2 fe3 fe4", "fe1 fe2 be fe3 fe4"},
		{"a tenant of forty nodes continues with every frontend in number order", tenant(40),
			"be " + strings.Join(fe40prov, " "), "fe1 fe2 be " + strings.Join(fe40upg, " ")},
		{"a reduced list without fe2 closes the gap", keys(t, "be fe1 fe3 fe4"), "be fe1 fe3 fe4", "fe1 be fe3 fe4"},
		{"frontends are ordered by number, not by name", keys(t, "fe10 fe9 be fe2"), "be fe2 fe9 fe10", "fe2 be fe9 fe10"},
		{"a tenant without its backend still orders its frontends", keys(t, "fe3 fe1"), "fe1 fe3", "fe1 fe3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.provision, render(o.Provisioning.Sequence(c.nodes)))
			assert.Equal(t, c.upgrade, render(o.Upgrade.Sequence(c.nodes)))
		})
	}
}

// The predecessor of every node must be the node right before it in the
// sequence of any tenant that holds both: that is what makes the injected
// one-entry default lists mean the same as the full order.
func TestPredecessorAgreesWithSequence(t *testing.T) {
	orders := []Orders{Builtin(), {Provisioning: Order{FrontendKey(3), Backend}, Upgrade: Order{Backend, FrontendKey(2), FrontendKey(5)}}}
	for _, o := range orders {
		for _, order := range []Order{o.Provisioning, o.Upgrade} {
			seq := order.Sequence(tenant(41))
			for i, k := range seq {
				prev, ok := order.Predecessor(k)
				if i == 0 {
					assert.False(t, ok, "%s is first in %s", k, order)
					continue
				}
				require.True(t, ok, "%s has a predecessor in %s", k, order)
				assert.Equal(t, seq[i-1], prev, "predecessor of %s in %s", k, order)
			}
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, good := range []string{"be", "fe1", "fe12", "fe999999"} {
		k, err := ParseKey(good)
		require.NoError(t, err, good)
		assert.Equal(t, good, k.String())
	}
	for _, bad := range []string{"", "BE", "fe", "fe0", "fe01", "fe-1", "fe1x", "web", "fe1234567"} {
		_, err := ParseKey(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseOrders(t *testing.T) {
	o, err := ParseOrders([]byte("provisioningOrder: [be, fe2]\nupgradeOrder: [fe1, be]\n"))
	require.NoError(t, err)
	assert.Equal(t, "be fe2 fe1 fe3", render(o.Provisioning.Sequence(tenant(4))))
	assert.Equal(t, "fe1 be fe2 fe3", render(o.Upgrade.Sequence(tenant(4))))

	bad := map[string]string{
		"provisioningOrder: [fe1]\nupgradeOrder: [be]\n":          `provisioningOrder: must list "be"`,
		"provisioningOrder: [be, be]\nupgradeOrder: [be]\n":       "provisioningOrder[1]: be is listed twice",
		"provisioningOrder: [be]\nupgradeOrder: [be, frontend]\n": `upgradeOrder[1]: "frontend" is not a node key`,
		"provisioningOrder: [be]\nupgradeOrder: [be]\nextra: 1\n": `unknown field "extra"`,
	}
	for in, want := range bad {
		_, err := ParseOrders([]byte(in))
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want)
	}
}

func TestLoadOrdersNamesTheFile(t *testing.T) {
	o, err := LoadOrders("")
	require.NoError(t, err)
	assert.Equal(t, Builtin(), o)
	_, err = LoadOrders("/nonexistent/orders.yaml")
	assert.ErrorContains(t, err, "/nonexistent/orders.yaml")
}
