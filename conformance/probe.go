package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// holdGate is the rollout gate the kit holds a node with: a gate of another
// system, which the operator must honour as it honours the sequencer's.
const holdGate = "conformance.express.medallia.com/hold"

// probe is one clause's node: a Backend called <clause>-be, the only node
// of tenant <clause> unless the clause makes a sibling.
type probe struct {
	c    client.Client
	cfg  Config
	ns   string
	name string
	// kind is the node's kind (a Backend when empty).
	kind string
	// tenant is the node's clusterName (its name without "-be" when empty).
	tenant string
	// rolloutID, when set, is the rollout-id every write of the node
	// carries: nodes of one tenant changed together share one.
	rolloutID string
	// stamped: express-sequencer's admission webhook stamps the target
	// hash; otherwise the kit writes it, as the webhook would.
	stamped bool
	// changes counts the kit's writes that change the node's target: each
	// carries a rollout-id of its own, so that express-sequencer, when
	// installed, releases it without waiting for a settle time.
	changes int
}

func (p *probe) gvk() schema.GroupVersionKind {
	if p.kind != "" {
		return p.cfg.GroupVersion.WithKind(p.kind)
	}
	return p.cfg.GroupVersion.WithKind(v2alpha1.KindBackend)
}

// sibling is a Frontend of p's tenant, called <tenant>-<key>.
func (p *probe) sibling(key string) *probe {
	tenant := p.tenantName()
	return &probe{c: p.c, cfg: p.cfg, ns: p.ns, name: tenant + "-" + key, kind: v2alpha1.KindFrontend, tenant: tenant}
}

// tenantName is the clusterName of p's tenant.
func (p *probe) tenantName() string {
	if p.tenant != "" {
		return p.tenant
	}
	return strings.TrimSuffix(p.name, "-be")
}

func (p *probe) key() client.ObjectKey { return client.ObjectKey{Namespace: p.ns, Name: p.name} }

// newNode is the node the kit creates: clusterConfig, the version, and the
// operator's own fields (Config.Spec).
func (p *probe) newNode(version string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(p.gvk())
	u.SetNamespace(p.ns)
	u.SetName(p.name)
	u.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "express-conformance"})
	spec := map[string]any{}
	for k, v := range p.cfg.Spec {
		spec[k] = v
	}
	tenant := p.tenantName()
	spec["clusterConfig"] = map[string]any{"clusterName": tenant, "tenantID": "conformance", "tenantName": tenant}
	spec["expressVersion"] = version
	u.Object["spec"] = spec
	return u
}

// create creates the node at version, with edit applied first (nil for
// none), and reads it back.
func (p *probe) create(ctx context.Context, version string, edit func(u *unstructured.Unstructured)) (*unstructured.Unstructured, error) {
	u := p.newNode(version)
	if edit != nil {
		edit(u)
	}
	p.markChange(u)
	if err := p.c.Create(ctx, u); err != nil {
		return nil, fmt.Errorf("creating %s %s/%s: %w", p.gvk().Kind, p.ns, p.name, err)
	}
	p.stamped = u.GetAnnotations()[v2alpha1.AnnotationTargetHash] != ""
	if !p.stamped {
		return p.update(ctx, func(*unstructured.Unstructured) {}) // the kit stamps it
	}
	return u, nil
}

// markChange gives a write that may change the node's target a rollout-id
// of its own.
func (p *probe) markChange(u *unstructured.Unstructured) {
	p.changes++
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v2alpha1.AnnotationRolloutID] = "conformance-" + strconv.Itoa(p.changes)
	if p.rolloutID != "" {
		ann[v2alpha1.AnnotationRolloutID] = p.rolloutID
	}
	u.SetAnnotations(ann)
}

// get reads the node.
func (p *probe) get(ctx context.Context) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(p.gvk())
	if err := p.c.Get(ctx, p.key(), u); err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", p.gvk().Kind, p.ns, p.name, err)
	}
	return u, nil
}

// update applies edit to the node as it is now, retrying on conflicts, and
// returns it as written. Without express-sequencer's webhook the kit
// stamps the target hash itself.
func (p *probe) update(ctx context.Context, edit func(u *unstructured.Unstructured)) (*unstructured.Unstructured, error) {
	for {
		u, err := p.get(ctx)
		if err != nil {
			return nil, err
		}
		edit(u)
		p.markChange(u)
		if !p.stamped {
			ann := u.GetAnnotations()
			ann[v2alpha1.AnnotationTargetHash] = targetHash(u)
			u.SetAnnotations(ann)
		}
		err = p.c.Update(ctx, u)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("updating %s %s/%s: %w", p.gvk().Kind, p.ns, p.name, err)
		}
		return u, nil
	}
}

// targetHash is the node's rollout target identity as express-sequencer's
// webhook computes it (rollout.TargetHash): its spec but its dependencies,
// gates and up flag.
func targetHash(u *unstructured.Unstructured) string {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	data, _ := json.Marshal(spec)
	hash, _ := rollout.TargetHash(data) // the spec was just encoded: it decodes
	return hash
}

// unacted is the path under spec of the field the operator does not act on.
func (p *probe) unacted() []string { return strings.Split(p.cfg.UnactedField, ".") }

// setField sets a spec field of u.
func setField(u *unstructured.Unstructured, value any, path ...string) {
	_ = unstructured.SetNestedField(u.Object, value, append([]string{"spec"}, path...)...)
}

// gates returns the names of the node's rollout gates.
func gates(u *unstructured.Unstructured) []string {
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "rolloutGates")
	var out []string
	for _, g := range list {
		if m, ok := g.(map[string]any); ok {
			if name, ok := m["name"].(string); ok {
				out = append(out, name)
			}
		}
	}
	return out
}

// addGate adds the kit's hold gate to u.
func addGate(u *unstructured.Unstructured) {
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "rolloutGates")
	if !slices.Contains(gates(u), holdGate) {
		list = append(list, map[string]any{"name": holdGate})
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "spec", "rolloutGates")
}

// removeGate removes the kit's hold gate from u.
func removeGate(u *unstructured.Unstructured) {
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "rolloutGates")
	list = slices.DeleteFunc(list, func(g any) bool { m, ok := g.(map[string]any); return ok && m["name"] == holdGate })
	if len(list) == 0 {
		unstructured.RemoveNestedField(u.Object, "spec", "rolloutGates")
		return
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "spec", "rolloutGates")
}

// pods lists the node's pods (labelled with its name).
func (p *probe) pods(ctx context.Context) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := p.c.List(ctx, &list, client.InNamespace(p.ns), client.MatchingLabels{v2alpha1.LabelNode: p.name}); err != nil {
		return nil, fmt.Errorf("listing the pods of %s: %w", p.name, err)
	}
	return list.Items, nil
}

// sets lists the StatefulSets whose pod template names the node.
func (p *probe) sets(ctx context.Context) ([]appsv1.StatefulSet, error) {
	var list appsv1.StatefulSetList
	if err := p.c.List(ctx, &list, client.InNamespace(p.ns)); err != nil {
		return nil, fmt.Errorf("listing StatefulSets in %s: %w", p.ns, err)
	}
	return slices.DeleteFunc(list.Items, func(s appsv1.StatefulSet) bool { return s.Spec.Template.Labels[v2alpha1.LabelNode] != p.name }), nil
}

// rolled reports whether the node is rolled out on its current target: no
// gate, at least one pod, as many as its StatefulSets want, every one
// Ready, not terminating, and labelled with the node's target hash, version
// and revision; otherwise it says what is not so.
func (p *probe) rolled(ctx context.Context) (bool, string, error) {
	u, err := p.get(ctx)
	if err != nil {
		return false, "", err
	}
	if g := gates(u); len(g) > 0 {
		return false, fmt.Sprintf("%s still carries rollout gates %v", p.name, g), nil
	}
	pods, err := p.pods(ctx)
	if err != nil {
		return false, "", err
	}
	sets, err := p.sets(ctx)
	if err != nil {
		return false, "", err
	}
	want := 0
	for _, s := range sets {
		if s.DeletionTimestamp == nil {
			want += int(ptr.Deref(s.Spec.Replicas, 1))
		}
	}
	if len(pods) == 0 || len(pods) < want {
		return false, fmt.Sprintf("%s has %d pods, its StatefulSets want %d", p.name, len(pods), want), nil
	}
	labels := wantLabels(u)
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			return false, fmt.Sprintf("pod %s is terminating", pod.Name), nil
		}
		if !podReady(pod) {
			return false, fmt.Sprintf("pod %s is not Ready", pod.Name), nil
		}
		for k, v := range labels {
			if got := pod.Labels[k]; got != v { // a label wanted empty may be left off: it reads as empty
				return false, fmt.Sprintf("pod %s has label %s=%q, the node's target wants %q", pod.Name, k, got, v), nil
			}
		}
	}
	return true, "", nil
}

// wantLabels are the labels every pod of node u carries on its target.
func wantLabels(u *unstructured.Unstructured) map[string]string {
	version, _, _ := unstructured.NestedString(u.Object, "spec", "expressVersion")
	revision, _, _ := unstructured.NestedString(u.Object, "spec", "deploymentRevision")
	return map[string]string{
		v2alpha1.LabelNode:               u.GetName(),
		v2alpha1.LabelTargetHash:         u.GetAnnotations()[v2alpha1.AnnotationTargetHash],
		v2alpha1.LabelExpressVersion:     version,
		v2alpha1.LabelDeploymentRevision: revision,
	}
}

// waitRolled waits until the node is rolled out on its current target
// (rolled), at most the rollout timeout; it fails with what was last not so.
func (p *probe) waitRolled(ctx context.Context, what string) error {
	var why string
	err := poll(ctx, p.cfg.RolloutTimeout, func() (bool, error) {
		ok, w, err := p.rolled(ctx)
		why = w
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("%s: not rolled out on its target within %s: %s", what, p.cfg.RolloutTimeout, why)
	}
	return nil
}

// delete deletes the node and waits until its pods are gone, unless the
// config keeps them.
func (p *probe) delete(ctx context.Context) {
	if p.cfg.Keep {
		return
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(p.gvk())
	u.SetNamespace(p.ns)
	u.SetName(p.name)
	_ = p.c.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// errTimedOut is poll's error when its timeout passed.
var errTimedOut = errors.New("timed out")

// poll calls f every 100 ms until it returns true or an error, or timeout
// passes (errTimedOut then).
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s", errTimedOut, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func podReady(p corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

func ptrValue[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// at formats an instant for evidence.
func at(t time.Time) string { return t.UTC().Format("15:04:05.000") }
