package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/medallia/express-sequencer/internal/rollout"
)

// explain says when the tenant's plan cut its loop searches short, and why;
// nothing when every search ended.
func TestExplainSaysWhenThePlanCutItsLoopSearchesShort(t *testing.T) {
	for name, c := range map[string]struct {
		why, want string
	}{
		"a plan that searched every loop says nothing":     {},
		"a plan out of its budget says every wait is kept": {rollout.LoopsOutOfBudget, "ran out of their budget: every wait is kept"},
		"a search out of its steps says that wait is kept": {rollout.LoopsOutOfSteps, "a search ran out of its steps: that wait is kept"},
	} {
		t.Run(name, func(t *testing.T) {
			line := loopsLine(rollout.Decision{Node: "acme-fe1", LoopsUnsure: c.why})
			if c.want == "" {
				assert.Empty(t, line)
				return
			}
			assert.Contains(t, line, "more wait-for loops than one plan searches")
			assert.Contains(t, line, c.want)
		})
	}
}
