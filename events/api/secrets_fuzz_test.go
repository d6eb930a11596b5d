package api

import (
	"encoding/json"
	"testing"
)

// FuzzRedactSecrets: whatever the document, redaction does not panic, keeps JSON valid, and
// redacting what it returned changes nothing more; a Secret's data values never survive.
func FuzzRedactSecrets(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"dg=="},"stringData":{"t":"v"}}`,
		`{"manifest":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e","annotations":{"kubernetes-fleet.io/envelope-configmap":"true"}},"data":{"s.yaml":"kind: Secret\napiVersion: v1\nstringData: {k: v}\n"}}`,
		`{"resource":{"version":"v1","kind":"Secret"},"drifts":[{"path":"/data/k","valueInHub":"v"}]}`,
		`[{"kind":"Secret","apiVersion":"v1","data":[1,2]},{"kind":"Secret","version":"v1","observedDiffs":"x"}]`,
		`kind: Secret`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, changed := RedactSecrets(data)
		if !changed {
			if string(out) != string(data) {
				t.Fatalf("unchanged but different: %q -> %q", data, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("redacted %q into invalid JSON %q", data, out)
		}
		if again, changed := RedactSecrets(out); changed {
			t.Fatalf("redacting twice changed it again: %q -> %q", out, again)
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		checkNoSecretValues(t, v)
	})
}

func checkNoSecretValues(t *testing.T, v any) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			checkNoSecretValues(t, e)
		}
	case map[string]any:
		if isCoreSecret(x) || isCoreSecretID(x) {
			for _, f := range []string{"data", "stringData"} {
				if m, ok := x[f].(map[string]any); ok {
					for k, val := range m {
						if val != Redacted {
							t.Fatalf("%s[%s] = %v survived", f, k, val)
						}
					}
				}
			}
		}
		for _, e := range x {
			checkNoSecretValues(t, e)
		}
	}
}
