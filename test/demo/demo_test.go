package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's demo, with short delays: it must end with every order as
// expected.
func TestTheDemoObservesTheExpectedOrders(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), options{startAfter: 50 * time.Millisecond, readyAfter: 200 * time.Millisecond, settle: 500 * time.Millisecond, timeout: time.Minute}, &out)
	require.NoError(t, err, out.String())
	for _, want := range []string{
		"1. be fe1 fe2 fe3 fe4     as expected",
		"2. fe1 fe2 be fe3 fe4     as expected",
		"3. fe1 fe2 be fe3 fe4     as expected",
		"4. be fe1 fe2 fe3 fe4     as expected",
		"5. fe1 fe3 fe4            as expected",
		"pod acme-fe4-",
		"SchedulingGated (express.medallia.com/sequencer)",
		"acme-fe4  pod acme-fe4-0 scheduling gate removed: scheduled on kwok-node-",
		"acme-fe1  pod acme-fe1-0 Terminating",
		"[5/5 nodes Ready on target]",
		"Every order was the expected one.",
		"acme-fe2  gated     WaitingForPrerequisite waiting for acme-fe1 (Frontend)",
		"acme-fe2  ungated   NodeDown",
	} {
		assert.Contains(t, out.String(), want)
	}
}

// cancelOn cancels once the output says a word, as Ctrl-C at that point.
type cancelOn struct {
	word   string
	cancel context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(c.word)) {
		c.cancel()
	}
	return len(p), nil
}

func TestAnInterruptedDemoStopsCleanly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := run(ctx, options{startAfter: 50 * time.Millisecond, readyAfter: 200 * time.Millisecond, settle: 500 * time.Millisecond, timeout: time.Minute},
		cancelOn{word: "Step 2/5", cancel: cancel})
	assert.ErrorIs(t, err, context.Canceled)
}
