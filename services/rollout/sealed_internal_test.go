package rollout

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/platform/sealing"
)

func testKeys(t *testing.T) *sealing.Keys {
	t.Helper()
	line, err := sealing.NewKeyLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	k, err := sealing.ParseKeys([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// What holds a Secret's value, itself or in an envelope, is stored as a shell that reads
// like the object and opens to the manifest given; the rest is stored as it is.
func TestSealedManifestsOpenToWhatWasGiven(t *testing.T) {
	keys := testKeys(t)
	for name, m := range map[string]string{
		"a Secret": `{"apiVersion":"v1","kind":"Secret","metadata":{"labels":{"app":"db"},"name":"db","namespace":"app"},"stringData":{"password":"pw-in-a-secret"}}`,
		"a ConfigMap envelope": `{"apiVersion":"v1","data":{"s.yaml":"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: pw-in-an-envelope}\n"},"kind":"ConfigMap",` +
			`"metadata":{"annotations":{"kubernetes-fleet.io/envelope-configmap":"true"},"name":"env","namespace":"app"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			stored, err := sealManifest(keys, json.RawMessage(m))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(stored), "pw-in-a") || !strings.Contains(string(stored), sealedField) {
				t.Fatalf("stored %s", stored)
			}
			var shell struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name   string            `json:"name"`
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(stored, &shell); err != nil || shell.Metadata.Name == "" {
				t.Errorf("the shell does not read as the object: %s (%v)", stored, err)
			}
			opened, err := openManifest(keys, stored)
			if err != nil || string(opened) != m {
				t.Errorf("opened %s, %v", opened, err)
			}
			// A shell copied onto another object's row does not open.
			moved := strings.Replace(string(stored), `"namespace":"app"`, `"namespace":"other"`, 1)
			if _, err := openManifest(keys, json.RawMessage(moved)); err == nil {
				t.Error("a shell moved to another namespace opened")
			}
			if _, err := sealManifest(nil, json.RawMessage(m)); !errors.Is(err, errNoKey) {
				t.Errorf("without keys: %v, want errNoKey", err)
			}
		})
	}
	plain := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}`
	if stored, err := sealManifest(nil, json.RawMessage(plain)); err != nil || string(stored) != plain {
		t.Errorf("a ConfigMap was stored as %s (%v)", stored, err)
	}
	if !hasSealedField(json.RawMessage(`{"kind":"ConfigMap","flotilla.io/sealed":"x"}`)) || hasSealedField(json.RawMessage(plain)) {
		t.Error("hasSealedField is wrong")
	}
}
