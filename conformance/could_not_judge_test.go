package conformance

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWhatEndedAClauseSaysWhetherTheKitCouldJudgeIt(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		err   error
		judge bool // the operator is judged: the clause fails
	}{
		{name: "the kit's watch refused by RBAC could not be judged",
			err: fmt.Errorf("watching the pods of x (RBAC watch on pods): %w", apierrors.NewForbidden(pods, "", errors.New(`User "kit" cannot watch resource "pods"`)))},
		{name: "the kit's credentials refused could not be judged",
			err: fmt.Errorf("creating Backend n/x-be: %w", apierrors.NewUnauthorized("Unauthorized"))},
		{name: "the API server not reached could not be judged",
			err: fmt.Errorf("reading x: %w", &url.Error{Op: "Get", URL: "https://10.0.0.1:6443", Err: syscall.ECONNREFUSED})},
		{name: "a run cancelled could not be judged", ctx: cancelled, err: errors.New("anything")},
		{name: "a change denied by an admission webhook is judged",
			err: fmt.Errorf("updating x: %w", apierrors.NewForbidden(pods, "x", errors.New(`admission webhook "validate.express.example.com" denied the request: rolloutGates is not a field`))), judge: true},
		{name: "a write the CRD's schema refuses is judged",
			err: fmt.Errorf("updating x: %w", apierrors.NewBadRequest("spec.rolloutGates: Invalid value")), judge: true},
		{name: "a rollout that never came is judged", err: fmt.Errorf("the node's first rollout: %w after 2m0s", errTimedOut), judge: true},
		{name: "evidence the kit wrote is judged", err: errors.New("pod x-be-0 created at 03:00:01.000"), judge: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			assert.Equal(t, !tc.judge, couldNotJudge(ctx, tc.err))
		})
	}
}

func TestARunTheKitCouldNotJudgeIsAnErrorNotAFailureOfTheOperator(t *testing.T) {
	r := newReport(Config{}, time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC))
	r.Mode = ModeWithSequencer
	r.add(ClauseResult{ID: "up-false", Section: "§1", Description: "down", Result: Passed, Duration: "7s"})
	r.add(ClauseResult{ID: "rolls-labelled", Section: "§2", Description: "labels", Result: Errored, Reason: `watching the pods: forbidden`, Duration: "1s"})
	assert.Equal(t, Summary{Result: RunError, Passed: 1, Errored: 1}, r.Summary)
	assert.False(t, r.Failed(), "the operator failed nothing")
	assert.True(t, r.Errored())

	data, err := r.JUnit()
	require.NoError(t, err)
	var suites junitSuites
	require.NoError(t, xml.Unmarshal(data, &suites))
	s := suites.Suites[0]
	assert.Equal(t, 1, s.Errors)
	assert.Equal(t, 0, s.Failures)
	require.NotNil(t, s.Cases[1].Error)
	assert.Nil(t, s.Cases[1].Failure)
	assert.Equal(t, "watching the pods: forbidden", s.Cases[1].Error.Text)

	var b bytes.Buffer
	require.NoError(t, r.Table(&b))
	assert.Contains(t, b.String(), "ERROR")
	assert.Contains(t, b.String(), "1 passed, 0 failed, 0 skipped, 1 could not be judged (error: the kit's access or the cluster, not the operator)")

	r.add(ClauseResult{ID: "gates-hold", Result: Failed})
	assert.Equal(t, RunFailure, r.Summary.Result, "a clause failed: a failure, whatever else")
}
