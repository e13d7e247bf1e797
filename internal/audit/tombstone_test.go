package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

var isController = true

// fakeInf is an informer of which only the reflector's progress and the store are read.
type fakeInf struct {
	toolscache.SharedIndexInformer
	rv    string
	store toolscache.Store
}

func (f *fakeInf) LastSyncResourceVersion() string { return f.rv }
func (f *fakeInf) GetStore() toolscache.Store      { return f.store }

func feObj(uid string, rv string, gated bool, target string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("express.medallia.com/v2alpha1")
	u.SetKind("Frontend")
	u.SetNamespace("acme")
	u.SetName("acme-fe1")
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	u.SetAnnotations(map[string]string{v2alpha1.AnnotationTargetHash: target})
	if gated {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": v2alpha1.GateSequencer}}, "spec", "rolloutGates")
	}
	return u
}

func podObj(uid, rv, target string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "acme-fe1-0", UID: types.UID(uid), ResourceVersion: rv,
		Labels:          map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: target},
		OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "acme-fe1", Controller: &isController}}}}
}

func setObj(uid, rv, target string) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "acme-fe1", UID: types.UID(uid), ResourceVersion: rv}}
	s.Spec.Template.Labels = map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: target}
	return s
}

// fe1 is deleted while the watches are broken (after 12) and made again
// just after the lists (50): gated at 52, released at 54, its StatefulSet
// made at 55 and its pod at 56 — all in order. The tombstone of the old
// fe1 is handled once the new watch has already delivered 52..60: dated
// when it is handled (60), it would make the new fe1's versions 52 and 54
// look older than the last and hide its release. It is dated by the list
// that found fe1 gone (50).
func TestATombstoneOfAListDatesTheDeletionBeforeTheListNotWhenItIsHandled(t *testing.T) {
	feInf := &fakeInf{rv: "10"}
	podInf := &fakeInf{rv: "10"}
	setInf := &fakeInf{rv: "10"}
	a := fedAuditor(feInf, podInf, setInf)
	a.handled[v2alpha1.KindBackend] = 1 << 40
	// As at the start: fe1 gated at 10 for v2, running v1.
	a.onSet(setObj("s1", "5", "v1"), true, false)
	a.onPodAdded(podObj("p1", "6", "v1"), true)
	a.onNode(v2alpha1.KindFrontend, feObj("u1", "10", true, "v2"), false)

	// A kube-apiserver restart: every watch broke after 12, lists at 50.
	for _, s := range []string{v2alpha1.KindFrontend, streamPods, streamSets} {
		a.relisted(s, 12, 50)
	}
	// The new watches deliver the new fe1 (52 gated, 54 released), its
	// StatefulSet (55), its pod (56) and more (60) before the handlers get
	// to the lists' tombstones.
	feInf.rv, setInf.rv, podInf.rv = "60", "60", "60"
	a.onNode(v2alpha1.KindFrontend, toolscache.DeletedFinalStateUnknown{Key: "acme/acme-fe1", Obj: feObj("u1", "10", true, "v2")}, true)
	a.onSet(toolscache.DeletedFinalStateUnknown{Key: "acme/acme-fe1", Obj: setObj("s1", "5", "v1")}, false, true)
	a.onPodDeleted(toolscache.DeletedFinalStateUnknown{Key: "acme/acme-fe1-0", Obj: podObj("p1", "6", "v1")}, podInf)
	a.onNode(v2alpha1.KindFrontend, feObj("u2", "52", true, "v2"), false)
	a.onNode(v2alpha1.KindFrontend, feObj("u2", "54", false, "v2"), false)
	a.onSet(setObj("s2", "55", "v2"), false, false)
	a.onPodAdded(podObj("p2", "56", "v2"), false)
	a.seen(v2alpha1.KindFrontend, 60)
	a.seen(streamSets, 60)
	a.seen(streamPods, 60)
	a.judge.PodsThrough = 60
	a.judge.CloseBlind(func(s string) uint64 { return a.handled[s] })
	found := a.judge.Settle(a.known)
	assert.Empty(t, found, "the new fe1's pod, made after its release: no violation")
}

// Namespaces are read as they are now, not judged by revision: a list of
// them leaves no blind span, which nothing would ever close.
func TestAListOfNamespacesMakesNoBlindSpan(t *testing.T) {
	a := &Auditor{judge: NewJudge(), handled: map[string]uint64{}, listedOnce: map[string]bool{}, listRV: map[string]uint64{}}
	a.relisted(streamNamespaces, 0, 1)
	for i := uint64(1); i <= 100; i++ {
		a.relisted(streamNamespaces, i*100, i*100+50)
	}
	a.handled[v2alpha1.KindFrontend], a.handled[streamPods], a.handled[streamSets] = 1<<40, 1<<40, 1<<40
	a.judge.PodsThrough = 1 << 40
	a.judge.CloseBlind(func(s string) uint64 { return a.handled[s] })
	a.judge.Settle(everything)
	assert.Empty(t, a.judge.blind)
}
