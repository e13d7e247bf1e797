package sequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

func frontendAt(name, uid, rv string, gates ...string) *v2alpha1.Frontend {
	fe := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv}}
	for _, g := range gates {
		fe.Spec.AddGate(g)
	}
	return fe
}

func TestOwnWritesAreLaidOverACacheThatHasNotSeenThem(t *testing.T) {
	tenant := rollout.Tenant{Namespace: "ns", ClusterName: "t"}
	cases := map[string]struct {
		written, cached *v2alpha1.Frontend
		wantGated       bool
		wantKept        bool
		wantErr         error
	}{
		"a release the cache has not seen yet is planned on as released": {
			written: frontendAt("fe1", "u1", "12"), cached: frontendAt("fe1", "u1", "10", v2alpha1.GateSequencer),
			wantGated: false, wantKept: true,
		},
		"a cache that caught up with the release is planned on and the write forgotten": {
			written: frontendAt("fe1", "u1", "12"), cached: frontendAt("fe1", "u1", "12"),
			wantGated: false, wantKept: false,
		},
		"a cache newer than the write (a user gated it again) wins": {
			written: frontendAt("fe1", "u1", "12"), cached: frontendAt("fe1", "u1", "15", v2alpha1.GateSequencer),
			wantGated: true, wantKept: false,
		},
		"a node deleted and created again under the same name is read from the cache": {
			written: frontendAt("fe1", "u1", "12"), cached: frontendAt("fe1", "u2", "11", v2alpha1.GateSequencer),
			wantGated: true, wantKept: false,
		},
		"resourceVersions that are not integers make the tenant read fresh": {
			written: frontendAt("fe1", "u1", "b"), cached: frontendAt("fe1", "u1", "a", v2alpha1.GateSequencer),
			wantErr: errUncomparable, wantKept: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var own ownWrites
			own.remember(tenant, tc.written)
			list := &v2alpha1.FrontendList{Items: []v2alpha1.Frontend{*tc.cached}}
			err := own.overlayList(list)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.wantGated, rollout.Gated(&list.Items[0]), "gated as planned on")
			}
			assert.Equal(t, tc.wantKept, own.size() == 1, "write still remembered")
		})
	}
}

func TestOwnWritesKeepTheNewestOfConcurrentAnswers(t *testing.T) {
	var own ownWrites
	tenant := rollout.Tenant{Namespace: "ns", ClusterName: "t"}
	own.remember(tenant, frontendAt("fe1", "u1", "14"))
	own.remember(tenant, frontendAt("fe1", "u1", "12", v2alpha1.GateSequencer)) // an older answer arriving late
	list := &v2alpha1.FrontendList{Items: []v2alpha1.Frontend{*frontendAt("fe1", "u1", "10", v2alpha1.GateSequencer)}}
	require.NoError(t, own.overlayList(list))
	assert.Equal(t, "14", list.Items[0].ResourceVersion)
}

func TestOwnWritesOfPodsAreStrippedAndForgottenOnceThePodIsGone(t *testing.T) {
	var own ownWrites
	tenant := rollout.Tenant{Namespace: "ns", ClusterName: "t"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fe1-0", Namespace: "ns", UID: "p1", ResourceVersion: "20",
		Labels:      map[string]string{v2alpha1.LabelNode: "fe1"},
		Annotations: map[string]string{"big": "value"}}}
	own.remember(tenant, pod)
	cached := &corev1.PodList{Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "fe1-0", Namespace: "ns", UID: "p1", ResourceVersion: "18"},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: v2alpha1.GateSequencer}}}}}}
	require.NoError(t, own.overlayList(cached))
	assert.Empty(t, cached.Items[0].Spec.SchedulingGates, "the pod release is planned on")
	assert.Empty(t, cached.Items[0].Annotations, "only what the sequencer reads is kept")

	other := rollout.Tenant{Namespace: "ns", ClusterName: "other"}
	own.forgetGone(&rollout.Snapshot{Tenant: other, Nodes: map[string]v2alpha1.Node{}})
	assert.Equal(t, 1, own.size(), "another tenant of the namespace leaves it alone")
	own.forgetGone(&rollout.Snapshot{Tenant: tenant, Nodes: map[string]v2alpha1.Node{}})
	assert.Zero(t, own.size(), "gone from its tenant's snapshot, the write is forgotten")
}
