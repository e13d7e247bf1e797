package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/medallia/express-sequencer/conformance"
)

func TestTheConformanceCommandExitsOneOnAFailureAndWithRequireAllOnASkip(t *testing.T) {
	var passed, partial, failed conformance.Report
	passed.Summary = conformance.Summary{Result: conformance.RunSuccess, Passed: 3}
	partial.Summary = conformance.Summary{Result: conformance.RunPartial, Passed: 2, Skipped: 1}
	failed.Summary = conformance.Summary{Result: conformance.RunFailure, Passed: 1, Failed: 1, Skipped: 1}
	for _, tc := range []struct {
		name       string
		report     conformance.Report
		requireAll bool
		want       error
	}{
		{"a run every clause passed ends well", passed, true, nil},
		{"a partial run ends well by default", partial, false, nil},
		{"a partial run fails with --require-all", partial, true, errConformancePartial},
		{"a failed run fails", failed, false, errConformanceFailed},
		{"a failed run fails as a failure with --require-all too", failed, true, errConformanceFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, conformanceExit(tc.report, tc.requireAll))
		})
	}
}
