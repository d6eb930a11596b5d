package api

import (
	"strings"
	"testing"
	"time"
)

func TestValidatePlacementFailoverAnnotations(t *testing.T) {
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"none", nil, ""},
		{"both", map[string]string{FailoverAfterAnnotation: "30s", FailbackAfterAnnotation: "2m"}, ""},
		{"not a duration", map[string]string{FailoverAfterAnnotation: "soon"},
			`metadata.annotations[flotilla.dev/failover-after]: "soon" is not a duration`},
		{"negative", map[string]string{FailbackAfterAnnotation: "-1m"},
			`metadata.annotations[flotilla.dev/failback-after]: "-1m" must be positive`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			crp := validPlacement()
			crp.Annotations = tt.annotations
			errs := ValidatePlacement(crp)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("ValidatePlacement: %v", errs)
				}
				fs, _ := Failover(crp)
				if tt.annotations != nil && (fs.After != 30*time.Second || fs.FailbackAfter != 2*time.Minute) {
					t.Fatalf("Failover = %+v", fs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.Error(), tt.want) {
				t.Fatalf("ValidatePlacement = %v, want %q", errs, tt.want)
			}
		})
	}
}
