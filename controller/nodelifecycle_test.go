package controller

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestTolerationFor(t *testing.T) {
	taint := &corev1.Taint{Key: TaintUnreachable, Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		want        time.Duration
		wantForever bool
	}{
		{name: "no toleration gets the default", pod: makePod("p").obj(), want: 300 * time.Second},
		{name: "matching toleration with seconds",
			pod: makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}).obj(),
			want: 30 * time.Second},
		{name: "the shortest matching toleration wins",
			pod: makePod("p").
				toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](30)}).
				toleration(corev1.Toleration{Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](10)}).obj(),
			want: 10 * time.Second},
		{name: "matching toleration without seconds tolerates forever",
			pod:         makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists}).obj(),
			wantForever: true},
		{name: "other key does not match",
			pod: makePod("p").toleration(corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists,
				TolerationSeconds: ptr.To[int64](5)}).obj(),
			want: 300 * time.Second},
		{name: "other effect does not match",
			pod: makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoSchedule}).obj(),
			want: 300 * time.Second},
		{name: "negative seconds mean at once",
			pod: makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists,
				TolerationSeconds: ptr.To[int64](-5)}).obj(),
			want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, forever := tolerationFor(tc.pod, taint, DefaultTolerationSeconds)
			if got != tc.want || forever != tc.wantForever {
				t.Errorf("tolerationFor = %v, %v; want %v, %v", got, forever, tc.want, tc.wantForever)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"node lifecycle without client", NodeLifecycleConfig{}.Validate()},
		{"node lifecycle period above grace", NodeLifecycleConfig{Client: cs, NodeMonitorPeriod: time.Minute}.Validate()},
		{"pod GC negative threshold", PodGCConfig{Client: cs, TerminatedPodThreshold: -1}.Validate()},
		{"pet without client", PetConfig{}.Validate()},
		{"replica set without client", ReplicaSetConfig{}.Validate()},
	} {
		if !errors.Is(tc.err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", tc.name, tc.err)
		}
	}
	for _, err := range []error{
		NodeLifecycleConfig{Client: cs}.Validate(), PodGCConfig{Client: cs}.Validate(),
		PetConfig{Client: cs}.Validate(), ReplicaSetConfig{Client: cs}.Validate(),
	} {
		if err != nil {
			t.Errorf("defaults do not validate: %v", err)
		}
	}
}
