// Command argocd-check runs Argo CD's own code for the tests of the test
// module: its Lua health evaluation with the resource customizations of an
// argocd-cm ConfigMap, and its diff — the three-way diff of client-side
// syncs and the server-side diff — with an Application's
// ignoreDifferences. It is a module of its own so that Argo CD's
// dependencies move nothing else; the tests run it through
// test/framework/argocd.
//
//	argocd-check health ARGOCD-CM.yaml < object.json     → {"status", "message"}
//	argocd-check diff < request.json                     → {"modified", "normalizedLive", "predictedLive"}
//	argocd-check normalize < request.json                → the object, normalized
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/argoproj/argo-cd/gitops-engine/pkg/diff"
	"github.com/argoproj/argo-cd/gitops-engine/pkg/health"
	"github.com/argoproj/argo-cd/gitops-engine/pkg/utils/kube"
	"github.com/argoproj/argo-cd/gitops-engine/pkg/utils/tracing"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-check:", err)
		os.Exit(1)
	}
}

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: health ARGOCD-CM.yaml, diff or normalize")
	}
	var answer any
	var err error
	switch args[0] {
	case "health":
		if len(args) != 2 {
			return errors.New("health wants the argocd-cm ConfigMap's file")
		}
		answer, err = healthOf(args[1], in)
	case "diff":
		answer, err = diffOf(in)
	case "normalize":
		answer, err = normalized(in)
	default:
		return fmt.Errorf("unknown command %q: want health, diff or normalize", args[0])
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(answer)
}

// healthOf evaluates the health of the object on in as Argo CD's
// application controller does, with the resource customizations Argo CD's
// settings manager reads from the argocd-cm ConfigMap in file.
func healthOf(file string, in io.Reader) (*health.HealthStatus, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(data, cm); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	// The settings manager reads argocd-cm and argocd-secret of its
	// namespace, labelled as Argo CD's own.
	const ns = "argocd"
	cm.Namespace = ns
	cm.Labels = map[string]string{"app.kubernetes.io/part-of": "argocd"}
	secret := &corev1.Secret{}
	secret.Name, secret.Namespace, secret.Labels = "argocd-secret", ns, cm.Labels
	overrides, err := settings.NewSettingsManager(context.Background(), fake.NewClientset(cm, secret), ns).GetResourceOverrides()
	if err != nil {
		return nil, fmt.Errorf("Argo CD's settings manager on %s: %w", file, err)
	}
	obj := &unstructured.Unstructured{}
	if err := json.NewDecoder(in).Decode(&obj.Object); err != nil {
		return nil, err
	}
	hs, err := health.GetResourceHealth(obj, lua.ResourceHealthOverrides(overrides))
	if err != nil {
		return nil, err
	}
	if hs == nil {
		return nil, fmt.Errorf("Argo CD has no health check for %s in %s", obj.GroupVersionKind(), file)
	}
	return hs, nil
}

// diffRequest is what diff and normalize read.
type diffRequest struct {
	Desired           map[string]any                       `json:"desired"`
	Live              map[string]any                       `json:"live"`
	IgnoreDifferences []v1alpha1.ResourceIgnoreDifferences `json:"ignoreDifferences"`
	// ServerSide diffs with a server-side apply dry run through the API
	// server of Kubeconfig, as Manager (Argo CD's argocd-controller).
	ServerSide bool   `json:"serverSide"`
	Kubeconfig string `json:"kubeconfig"`
	Manager    string `json:"manager"`
	// IncludeMutationWebhook keeps in the server-side diff what admission
	// webhooks change in the dry run (compare option
	// IncludeMutationWebhook=true); Argo CD drops it by default.
	IncludeMutationWebhook bool `json:"includeMutationWebhook"`
}

// diffAnswer is what diff writes: Argo CD's verdict, and both sides as it
// compared them.
type diffAnswer struct {
	Modified       bool            `json:"modified"`
	NormalizedLive json.RawMessage `json:"normalizedLive"`
	PredictedLive  json.RawMessage `json:"predictedLive"`
}

// diffOf diffs as Argo CD's application controller does for a resource of
// an Application with the request's ignoreDifferences (argo/diff.StateDiff).
func diffOf(in io.Reader) (*diffAnswer, error) {
	var r diffRequest
	if err := json.NewDecoder(in).Decode(&r); err != nil {
		return nil, err
	}
	b := argodiff.NewDiffConfigBuilder().
		WithDiffSettings(r.IgnoreDifferences, map[string]v1alpha1.ResourceOverride{}, false, normalizers.IgnoreNormalizerOpts{}).
		WithNoCache()
	if r.ServerSide {
		cfg, err := clientcmd.BuildConfigFromFlags("", r.Kubeconfig)
		if err != nil {
			return nil, err
		}
		kubectl := &kube.KubectlCmd{Log: logr.Discard(), Tracer: tracing.NopTracer{}}
		_, gvkParser, err := kubectl.LoadOpenAPISchema(cfg)
		if err != nil {
			return nil, fmt.Errorf("loading the API server's OpenAPI schema: %w", err)
		}
		applier, cleanup, err := kubectl.ManageServerSideDiffDryRuns(cfg)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		b = b.WithServerSideDiff(true).WithServerSideDryRunner(diff.NewK8sServerSideDryRunner(applier)).
			WithManager(r.Manager).WithGVKParser(gvkParser).WithIgnoreMutationWebhook(!r.IncludeMutationWebhook)
	}
	dc, err := b.Build()
	if err != nil {
		return nil, err
	}
	res, err := argodiff.StateDiff(&unstructured.Unstructured{Object: r.Live}, &unstructured.Unstructured{Object: r.Desired}, dc)
	if err != nil {
		return nil, err
	}
	return &diffAnswer{Modified: res.Modified, NormalizedLive: res.NormalizedLive, PredictedLive: res.PredictedLive}, nil
}

// normalized applies the request's ignoreDifferences to its live object
// with Argo CD's ignore normalizer.
func normalized(in io.Reader) (map[string]any, error) {
	var r diffRequest
	if err := json.NewDecoder(in).Decode(&r); err != nil {
		return nil, err
	}
	n, err := normalizers.NewIgnoreNormalizer(r.IgnoreDifferences, nil, normalizers.IgnoreNormalizerOpts{})
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: r.Live}
	if err := n.Normalize(u); err != nil {
		return nil, err
	}
	return u.Object, nil
}
