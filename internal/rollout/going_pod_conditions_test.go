package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// fe1 recovers (its new pod held) and names be as its provisioning
// prerequisite with a condition other than Ready=True (podConditionType
// ContainersReady, or conditionStatus False). be's only pod still says
// what is asked; whether it is going decides.
func TestAPrerequisitesPodThatIsGoingMeetsNoConditionItStillCarries(t *testing.T) {
	lost := func(p *corev1.Pod, read *Objects) { read.LostMachines = map[string]bool{p.Spec.NodeName: true} }
	deleted := func(p *corev1.Pod, _ *Objects) {
		p.DeletionTimestamp = &metav1.Time{Time: p.CreationTimestamp.Add(time.Minute)}
	}
	stays := func(*corev1.Pod, *Objects) {}
	containersReady := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
	notReady := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
	for _, tc := range []struct {
		name     string
		going    func(p *corev1.Pod, read *Objects)
		asked    corev1.PodCondition
		mayStart bool
	}{
		{name: "a pod on a machine that is lost meets none: no kubelet is left to say otherwise", going: lost, asked: containersReady},
		{name: "a pod being deleted meets none", going: deleted, asked: containersReady},
		{name: "a pod that stays meets it (the control)", going: stays, asked: containersReady, mayStart: true},
		{name: "a pod being deleted meets no condition asked to be False either", going: deleted, asked: notReady},
		{name: "a pod on a machine that is lost meets no condition asked to be False either", going: lost, asked: notReady},
		{name: "a pod that stays, not Ready, meets Ready=False (the control)", going: stays, asked: notReady, mayStart: true},
		// An entry stored with neither (no CRD default, no webhook) asks
		// what the CRD's defaults say: Ready=True.
		{name: "a pod being deleted meets no entry stored with neither condition nor status", going: deleted},
		{name: "a pod on a machine that is lost meets no entry stored with neither condition nor status", going: lost},
		{name: "a pod that stays, Ready, meets an entry stored with neither (the control)", going: stays, mayStart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			be := orphanTestNode(v2alpha1.KindBackend, "acme-be", now.Add(-3*time.Hour))
			set := orphanTestSet("acme-be", be)
			pod := orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", now.Add(-time.Hour), tc.asked.Type != corev1.PodReady, setOwner(set.Name, set.UID))
			pod.Spec.NodeName = "machine-1"
			if tc.asked.Type != corev1.PodReady && tc.asked.Type != "" {
				pod.Status.Conditions = append(pod.Status.Conditions, tc.asked)
			}
			read := fe1RecoveringRead(now, be)
			tc.going(&pod, &read)
			read.Pods = append(read.Pods, pod)
			read.StatefulSets = append(read.StatefulSets, set)
			read.Nodes[1].NodeSpec().DeploymentDependencies.ProvisioningPrerequisites = []v2alpha1.Prerequisite{{
				ExpressNode: "acme-be", Kind: v2alpha1.KindBackend, PodConditionType: string(tc.asked.Type), ConditionStatus: string(tc.asked.Status)}}
			s := SnapshotOf(read, orphanTenant, defaults.Builtin(), now)
			require.False(t, defaults.IsDefaulted(read.Nodes[1], defaults.ProvisioningList), "fe1's list is its own")

			ok, why := PodsMayStart(s, "acme-fe1")
			assert.Equal(t, tc.mayStart, ok, "the pod rule: %s", why)
			assert.Equal(t, tc.mayStart, releasesPod(Plan(s), "acme-fe1-0"), "the plan")
			if !tc.mayStart {
				assert.Contains(t, why, "acme-be")
			}
		})
	}
}
