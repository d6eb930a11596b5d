package applier

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAppliedTimeNeverEarly: managedFields times are whole seconds, so an
// apply recorded at second s happened before s+1. The applied time must never
// be earlier than the real one, or a not-trackable object counts available
// before its unavailable period has passed (CI saw it when an apply landed
// just before a second boundary).
func TestAppliedTimeNeverEarly(t *testing.T) {
	at := func(sec time.Time) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "someone-else", Time: &metav1.Time{Time: sec.Add(time.Hour)}},
			{Manager: FieldManager, Time: &metav1.Time{Time: sec}},
		})
		return u
	}
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"applied just before the boundary, read just after: the end of the recorded second", base.Add(1010 * time.Millisecond), base.Add(time.Second)},
		{"read within the recorded second", base.Add(300 * time.Millisecond), base.Add(300 * time.Millisecond)},
		{"read long after: end of the recorded second", base.Add(time.Minute), base.Add(time.Second)},
	} {
		if got := appliedTime(at(base), c.now); !got.Equal(c.want) {
			t.Errorf("%s: appliedTime = %s, want %s", c.name, got.Format(time.StampMilli), c.want.Format(time.StampMilli))
		}
	}
	if got := appliedTime(&unstructured.Unstructured{Object: map[string]any{}}, base); !got.IsZero() {
		t.Errorf("no apply entry: appliedTime = %s, want zero", got)
	}
}
