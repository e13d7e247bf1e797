package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTheStacksCPUAndTheSequencersAreReportedPerNodeRolloutWithEachOtherProcessBesideThem(t *testing.T) {
	var out bytes.Buffer
	reportStackCPU(&out, map[string]time.Duration{"kube-apiserver": 2 * time.Minute, "express-sequencer": 48 * time.Second, "etcd": 30 * time.Second, "kube-scheduler": 4 * time.Second}, 3200)
	assert.Equal(t, "  over provisioning and upgrade alone: kube-apiserver CPU time 2m0s, 37.5 ms per node rollout (every client's calls, not the sequencer's alone); express-sequencer 48s, 15.0 ms; etcd 30s; kube-scheduler 4s\n", out.String())
}
