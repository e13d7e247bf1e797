// Package argocd runs Argo CD's own code for the tests: its Lua health
// evaluation with the resource customizations of config/argocd's argocd-cm,
// and its diff — three-way as a client-side sync compares, and server-side
// — with an Application's ignoreDifferences. The code runs in the
// argocd-check command of the test/argocd module (a module of its own, so
// that Argo CD's dependencies move nothing here), built once per test
// binary.
package argocd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/gobuild"
)

// The health statuses Argo CD knows.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Suspended   = "Suspended"
	Degraded    = "Degraded"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Status is a resource's health as Argo CD evaluates it.
type Status struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Ignore is one entry of an Application's spec.ignoreDifferences.
type Ignore struct {
	Group                 string   `json:"group,omitempty"`
	Kind                  string   `json:"kind"`
	JSONPointers          []string `json:"jsonPointers,omitempty"`
	JQPathExpressions     []string `json:"jqPathExpressions,omitempty"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers,omitempty"`
}

// checker builds argocd-check from the test/argocd module, once.
var checker = sync.OnceValues(func() (string, error) { return gobuild.Binary(filepath.Join("test", "argocd"), "argocd-check") })

// call runs argocd-check with args, in encoded as JSON on its input, and
// decodes its answer into out.
func call(args []string, in, out any) error {
	path, err := checker()
	if err != nil {
		return err
	}
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(data), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return json.Unmarshal(stdout.Bytes(), out)
}

// ConfigMap is config/argocd/argocd-cm.yaml, the snippet the docs give.
func ConfigMap() string {
	return filepath.Join(controlplane.Root(), "config", "argocd", "argocd-cm.yaml")
}

// HealthScript returns config/argocd/health.lua, the file the snippets are
// rendered from.
func HealthScript() (string, error) {
	b, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "argocd", "health.lua"))
	return string(b), err
}

// Health evaluates obj's health with Argo CD's code and the resource
// customizations of the argocd-cm ConfigMap in file (ConfigMap() for the
// one the docs give), as Argo CD's application controller does.
func Health(file string, obj *unstructured.Unstructured) (Status, error) {
	var s Status
	err := call([]string{"health", file}, obj.Object, &s)
	return s, err
}

// diffAnswer is argocd-check diff's answer.
type diffAnswer struct {
	Modified       bool           `json:"modified"`
	NormalizedLive map[string]any `json:"normalizedLive"`
	PredictedLive  map[string]any `json:"predictedLive"`
}

// Diff is Argo CD's diff of a resource it syncs client-side (kubectl
// apply): three-way, from the desired manifest, the live object and the
// last-applied-configuration on it, with the ignores. It returns whether
// Argo CD shows the resource OutOfSync and the JSON pointers that differ.
func Diff(desired, live *unstructured.Unstructured, ignores []Ignore) (bool, []string, error) {
	return diff(map[string]any{"desired": desired.Object, "live": live.Object, "ignoreDifferences": ignores})
}

// ServerSideDiff is Argo CD's server-side diff: a server-side apply dry run
// of the desired manifest as manager, through the API server of
// kubeconfig (and so through its admission webhooks), compared with the
// live object, with the ignores. withWebhooks keeps what the webhooks
// change in the dry run (compare option IncludeMutationWebhook=true, the
// strictest form); Argo CD drops it by default.
func ServerSideDiff(desired, live *unstructured.Unstructured, ignores []Ignore, kubeconfig, manager string, withWebhooks bool) (bool, []string, error) {
	return diff(map[string]any{"desired": desired.Object, "live": live.Object, "ignoreDifferences": ignores,
		"serverSide": true, "kubeconfig": kubeconfig, "manager": manager, "includeMutationWebhook": withWebhooks})
}

func diff(request map[string]any) (bool, []string, error) {
	var a diffAnswer
	if err := call([]string{"diff"}, request, &a); err != nil {
		return false, nil, err
	}
	return a.Modified, Differences(a.PredictedLive, a.NormalizedLive), nil
}

// Normalize removes what the ignores name from u in place, with Argo CD's
// ignoreDifferences normalizer.
func Normalize(u *unstructured.Unstructured, ignores []Ignore) error {
	var out map[string]any
	if err := call([]string{"normalize"}, map[string]any{"live": u.Object, "ignoreDifferences": ignores}, &out); err != nil {
		return err
	}
	u.Object = out
	return nil
}

// Differences lists the JSON pointers where two decoded JSON documents
// differ.
func Differences(a, b any) []string { return differences("", a, b) }

func differences(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var keys []string
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var out []string
		for _, k := range keys {
			out = append(out, differences(path+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), am[k], bm[k])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{path}
}
