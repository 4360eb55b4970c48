package v1

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodDoNotDisrupt(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	started := func(ago time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-ago)); return &t }
	cases := []struct {
		name      string
		value     string
		set       bool
		start     *metav1.Time
		protected bool
		until     time.Time
	}{
		{name: "no annotation"},
		{name: "true", value: "true", set: true, start: started(time.Hour), protected: true},
		{name: "false", value: "false", set: true, start: started(time.Hour)},
		{name: "not a duration", value: "an hour", set: true, start: started(time.Minute)},
		{name: "a duration not over yet", value: "30m", set: true, start: started(10 * time.Minute), protected: true, until: now.Add(20 * time.Minute)},
		{name: "a duration over", value: "30m", set: true, start: started(31 * time.Minute), until: now.Add(-time.Minute)},
		{name: "a pod not started yet is protected from now", value: "5m", set: true, protected: true, until: now.Add(5 * time.Minute)},
		{name: "a zero duration protects nothing", value: "0s", set: true, start: started(time.Minute)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{StartTime: c.start}}
			if c.set {
				pod.Annotations = map[string]string{DoNotDisruptAnnotationKey: c.value}
			}
			protected, until := PodDoNotDisrupt(pod, now)
			if protected != c.protected || !until.Equal(c.until) {
				t.Errorf("PodDoNotDisrupt = %v until %v, want %v until %v", protected, until, c.protected, c.until)
			}
		})
	}
}
