package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTheStacksCPUIsReportedPerNodeRolloutWithEachOtherProcessBesideIt(t *testing.T) {
	var out bytes.Buffer
	reportStackCPU(&out, map[string]time.Duration{"kube-apiserver": 2 * time.Minute, "etcd": 30 * time.Second, "kube-scheduler": 4 * time.Second}, 3200)
	assert.Equal(t, "  kube-apiserver CPU time: 2m0s, 37.5 ms per node rollout (provisioning and upgrade; every client's calls, not the sequencer's alone); etcd 30s; kube-scheduler 4s\n", out.String())
}
