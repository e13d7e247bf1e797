package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The commands refuse what they cannot run, naming it.
func TestArgocdCheckRefusesBadCommands(t *testing.T) {
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"no command":               {nil, "want a command"},
		"an unknown command":       {[]string{"lint"}, `unknown command "lint"`},
		"health without a file":    {[]string{"health"}, "health wants the argocd-cm ConfigMap's file"},
		"health of a missing file": {[]string{"health", "/nonexistent/argocd-cm.yaml"}, "/nonexistent/argocd-cm.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(c.args, strings.NewReader("{}"), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// Argo CD's three-way diff sees a field changed in the live object, and
// the ignoreDifferences that name it hide it.
func TestDiffSeesAChangeTheIgnoresHide(t *testing.T) {
	desired := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "n"}, "data": map[string]any{"a": "1"}}
	applied, err := json.Marshal(desired)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"a": "2"},
		"metadata": map[string]any{"name": "c", "namespace": "n", "annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": string(applied)}}}
	for _, c := range []struct {
		ignores  []map[string]any
		modified bool
	}{
		{nil, true},
		{[]map[string]any{{"kind": "ConfigMap", "jsonPointers": []string{"/data/a"}}}, false},
	} {
		in, err := json.Marshal(map[string]any{"desired": desired, "live": live, "ignoreDifferences": c.ignores})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run([]string{"diff"}, bytes.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		var answer diffAnswer
		if err := json.Unmarshal(out.Bytes(), &answer); err != nil {
			t.Fatal(err)
		}
		if answer.Modified != c.modified {
			t.Errorf("ignores %v: modified %v, want %v", c.ignores, answer.Modified, c.modified)
		}
	}
}
