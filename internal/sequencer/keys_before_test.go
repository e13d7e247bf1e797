package sequencer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/medallia/express-sequencer/internal/defaults"
)

// The fresh read by name reads, for a defaulted list, every key that can
// come before the node in its order: whatever nodes the tenant has, the
// reduced list never puts a key before it that keysBefore leaves out.
func TestEveryKeyTheReducedListPutsBeforeANodeIsOneTheReadByNameAsksFor(t *testing.T) {
	orders := []defaults.Order{
		defaults.Builtin().Provisioning,
		defaults.Builtin().Upgrade,
		{defaults.FrontendKey(3), defaults.Backend, defaults.FrontendKey(1)},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, o := range orders {
		for range 2000 {
			var keys []defaults.Key
			if rng.IntN(2) == 0 {
				keys = append(keys, defaults.Backend)
			}
			for n := 1; n <= 12; n++ {
				if rng.IntN(2) == 0 {
					keys = append(keys, defaults.FrontendKey(n))
				}
			}
			if len(keys) == 0 {
				continue
			}
			k := keys[rng.IntN(len(keys))]
			seq := o.Sequence(keys)
			before := keysBefore(o, k)
			for _, prev := range seq[:slices.Index(seq, k)] {
				if !assert.Contains(t, before, prev, "order %v, tenant %v: %v before %v", o, keys, prev, k) {
					return
				}
			}
		}
	}
}

func TestKeysBefore(t *testing.T) {
	upgrade := defaults.Builtin().Upgrade // fe1, fe2, be
	for _, tc := range []struct {
		name string
		k    defaults.Key
		want []defaults.Key
	}{
		{"the first key of the head has none before it", defaults.FrontendKey(1), []defaults.Key{}},
		{"a key of the head has the head's keys before it", defaults.Backend, []defaults.Key{defaults.FrontendKey(1), defaults.FrontendKey(2)}},
		{"a frontend beyond the head has the head and every lower frontend before it", defaults.FrontendKey(5),
			[]defaults.Key{defaults.FrontendKey(1), defaults.FrontendKey(2), defaults.Backend, defaults.FrontendKey(3), defaults.FrontendKey(4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, keysBefore(upgrade, tc.k))
		})
	}
}
