package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestPetOrdinal(t *testing.T) {
	for _, tc := range []struct {
		pod  string
		want int
		ok   bool
	}{
		{"db-0", 0, true}, {"db-12", 12, true}, {"db-", 0, false}, {"db-01", 0, false},
		{"db-x", 0, false}, {"db-+1", 0, false}, {"db-a-1", 0, false}, {"dbx-1", 0, false},
	} {
		got, ok := petOrdinal("db", tc.pod)
		if got != tc.want || ok != tc.ok {
			t.Errorf("petOrdinal(db, %s) = %d, %v; want %d, %v", tc.pod, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPlanPets: an ordinal is recreated only once no pod object of it
// exists (PS-11); a failed pet is removed only when its node is Ready.
func TestPlanPets(t *testing.T) {
	set := func(n int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(n)}}
	}
	ready := func(n string) bool { return n == "up" }
	type want struct {
		Create []int
		Remove []string
	}
	for _, tc := range []struct {
		name string
		set  *appsv1.StatefulSet
		pets map[int]*corev1.Pod
		want want
	}{
		{name: "creates missing ordinals", set: set(3),
			pets: map[int]*corev1.Pod{1: makePod("db-1").obj()},
			want: want{Create: []int{0, 2}}},
		{name: "waits for a terminating pet", set: set(1),
			pets: map[int]*corev1.Pod{0: makePod("db-0").node("down").terminating().obj()}},
		{name: "waits for a failed pet on a node that is not ready", set: set(1),
			pets: map[int]*corev1.Pod{0: makePod("db-0").node("down").phase(corev1.PodFailed).obj()}},
		{name: "removes a failed pet on a ready node", set: set(1),
			pets: map[int]*corev1.Pod{0: makePod("db-0").node("up").phase(corev1.PodFailed).obj()},
			want: want{Remove: []string{"db-0"}}},
		{name: "scales down from the highest ordinal", set: set(1),
			pets: map[int]*corev1.Pod{
				0: makePod("db-0").obj(), 1: makePod("db-1").obj(), 2: makePod("db-2").obj(),
				3: makePod("db-3").terminating().obj(),
			},
			want: want{Remove: []string{"db-2", "db-1"}}},
		{name: "default one replica", set: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}},
			want: want{Create: []int{0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planPets(tc.set, tc.pets, ready)
			got := want{Create: plan.create, Remove: names(plan.remove)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewPet(t *testing.T) {
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "u1"},
		Spec: appsv1.StatefulSetSpec{ServiceName: "svc", Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		}},
	}
	p := newPet(set, 2)
	if diff := cmp.Diff(map[string]string{"app": "db", LabelPetName: "db-2", LabelPetIndex: "2",
		appsv1.ControllerRevisionHashLabelKey: petRevision(set)}, p.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if p.Name != "db-2" || p.Spec.Hostname != "db-2" || p.Spec.Subdomain != "svc" {
		t.Errorf("name %s hostname %s subdomain %s", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "u1" || ref.Kind != "StatefulSet" {
		t.Errorf("controller reference = %+v", ref)
	}
	if set.Spec.Template.Labels[LabelPetName] != "" {
		t.Error("newPet changed the set's template")
	}
}

// TestRollingUpdate: a changed template rolls the pets as RollingUpdate
// does — one at a time, highest ordinal first, only once every pet is
// Running and Ready, never below the partition — and OnDelete rolls none;
// the status tells kubectl rollout status how far it got.
func TestRollingUpdate(t *testing.T) {
	set := func(image string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}}}
	}
	old, cur := set("v1"), set("v2")
	if petRevision(old) == petRevision(cur) || petRevision(old) != petRevision(set("v1")) {
		t.Fatalf("revisions %s %s", petRevision(old), petRevision(cur))
	}
	pet := func(s *appsv1.StatefulSet, ord int) *corev1.Pod {
		p := newPet(s, ord)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return p
	}
	pets := map[int]*corev1.Pod{0: pet(old, 0), 1: pet(old, 1), 2: pet(old, 2)}
	removes := func(s *appsv1.StatefulSet, pets map[int]*corev1.Pod) []string {
		return names(planPets(s, pets, func(string) bool { return true }).remove)
	}
	if got := removes(old, pets); len(got) != 0 {
		t.Errorf("an unchanged template rolls %v", got)
	}
	if got := removes(cur, pets); !cmp.Equal(got, []string{"db-2"}) {
		t.Errorf("first roll %v, want db-2", got)
	}
	st := petStatus(cur, pets)
	if st.UpdateRevision != petRevision(cur) || st.CurrentRevision != petRevision(old) || st.UpdatedReplicas != 0 || st.CurrentReplicas != 3 {
		t.Errorf("status before the roll %+v", st)
	}
	// db-2 recreated from the new template but not Ready yet: wait.
	pets[2] = newPet(cur, 2)
	if got := removes(cur, pets); len(got) != 0 {
		t.Errorf("rolled %v while db-2 is not ready", got)
	}
	pets[2] = pet(cur, 2)
	if got := removes(cur, pets); !cmp.Equal(got, []string{"db-1"}) {
		t.Errorf("second roll %v, want db-1", got)
	}
	st = petStatus(cur, pets)
	if st.UpdatedReplicas != 1 || st.CurrentReplicas != 2 {
		t.Errorf("status mid-roll %+v", st)
	}
	// A partition of 1 keeps db-0 at the old revision.
	part := cur.DeepCopy()
	part.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}}
	pets[1] = pet(cur, 1)
	if got := removes(part, pets); len(got) != 0 {
		t.Errorf("rolled %v below the partition", got)
	}
	if got := removes(cur, pets); !cmp.Equal(got, []string{"db-0"}) {
		t.Errorf("third roll %v, want db-0", got)
	}
	// A terminating pet holds the roll.
	pets[0] = pet(old, 0)
	pets[0].DeletionTimestamp = &metav1.Time{}
	if got := removes(cur, pets); len(got) != 0 {
		t.Errorf("rolled %v while db-0 terminates", got)
	}
	pets[0] = pet(cur, 0)
	st = petStatus(cur, pets)
	if st.UpdatedReplicas != 3 || st.CurrentRevision != st.UpdateRevision || st.CurrentReplicas != 3 || st.ReadyReplicas != 3 {
		t.Errorf("status after the roll %+v", st)
	}
	onDelete := cur.DeepCopy()
	onDelete.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
	if got := removes(onDelete, map[int]*corev1.Pod{0: pet(old, 0), 1: pet(old, 1), 2: pet(old, 2)}); len(got) != 0 {
		t.Errorf("OnDelete rolled %v", got)
	}
}

// TestPetStatusSkipsOnlyTerminatingPets: a terminating pet counts in
// Replicas but not as ready or updated, and every other pet still counts
// whatever the map's iteration order (so petStatus runs many times).
func TestPetStatusSkipsOnlyTerminatingPets(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 1}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](8),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}}}}}
	pets := map[int]*corev1.Pod{}
	for i := range 8 {
		p := newPet(set, i)
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		pets[i] = p
	}
	pets[3].DeletionTimestamp = &metav1.Time{}
	for range 200 {
		st := petStatus(set, pets)
		if st.Replicas != 8 || st.ReadyReplicas != 7 || st.AvailableReplicas != 7 || st.UpdatedReplicas != 7 {
			t.Fatalf("status %+v; want 8 replicas, 7 ready, available and updated", st)
		}
	}
}

// TestPetUpdateStatusWritesEveryChange: the pet controller writes the
// status when any field it computes changed, each alone (the revisions too,
// which kubectl rollout status reads), and makes no write when none did.
func TestPetUpdateStatusWritesEveryChange(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Generation: 2},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}}}}}
	p := newPet(set, 0)
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pets := map[int]*corev1.Pod{0: p}
	set.Status = petStatus(set, pets)
	for _, tc := range []struct {
		name   string
		change func(*appsv1.StatefulSetStatus)
	}{
		{"nothing", nil},
		{"observedGeneration", func(s *appsv1.StatefulSetStatus) { s.ObservedGeneration = 1 }},
		{"replicas", func(s *appsv1.StatefulSetStatus) { s.Replicas = 2 }},
		{"readyReplicas", func(s *appsv1.StatefulSetStatus) { s.ReadyReplicas = 0 }},
		{"availableReplicas", func(s *appsv1.StatefulSetStatus) { s.AvailableReplicas = 0 }},
		{"currentReplicas", func(s *appsv1.StatefulSetStatus) { s.CurrentReplicas = 0 }},
		{"updatedReplicas", func(s *appsv1.StatefulSetStatus) { s.UpdatedReplicas = 0 }},
		{"currentRevision", func(s *appsv1.StatefulSetStatus) { s.CurrentRevision = "old" }},
		{"updateRevision", func(s *appsv1.StatefulSetStatus) { s.UpdateRevision = "old" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stale := set.DeepCopy()
			if tc.change != nil {
				tc.change(&stale.Status)
			}
			cs := fake.NewClientset(stale)
			pc := &Pet{cfg: PetConfig{Client: cs}}
			if err := pc.updateStatus(context.Background(), stale, pets); err != nil {
				t.Fatal(err)
			}
			var writes int
			for _, a := range cs.Actions() {
				if a.GetVerb() == "update" && a.GetSubresource() == "status" {
					writes++
				}
			}
			if want := map[bool]int{true: 0, false: 1}[tc.change == nil]; writes != want {
				t.Fatalf("%d status writes, want %d", writes, want)
			}
			if tc.change == nil {
				return
			}
			got, err := cs.AppsV1().StatefulSets("ns").Get(context.Background(), "db", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(set.Status, got.Status); diff != "" {
				t.Errorf("status written (-want +got):\n%s", diff)
			}
		})
	}
}
