package api

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

const (
	secretValue   = "hunter2-the-password"
	secretToken   = "tok-3141592653"
	secretInYAML  = "yaml-held-value"
	secretInDrift = "drifted-value"
)

var secretB64 = base64.StdEncoding.EncodeToString([]byte(secretValue))

func TestRedactSecretsFindsEveryValue(t *testing.T) {
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"app",
		"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"` + secretB64 + `\"}}","team":"a"}},
		"type":"Opaque","data":{"password":"` + secretB64 + `"},"stringData":{"token":"` + secretToken + `"}}`
	for name, doc := range map[string]string{
		"a Secret":                    secret,
		"a hub resource event":        `{"manifest":` + secret + `}`,
		"a list of manifests":         `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}},` + secret + `]`,
		"a ResourceEnvelope":          `{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ResourceEnvelope","metadata":{"name":"e","namespace":"app"},"data":{"db.yaml":` + secret + `}}`,
		"a ConfigMap envelope (YAML)": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e","annotations":{"kubernetes-fleet.io/envelope-configmap":"true"}},"data":{"s.yaml":"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  token: ` + secretToken + `\ndata:\n  password: ` + secretB64 + `\n"}}`,
		"a report's drifts and takeovers": `{"cluster":"m1","manifests":[{"resource":{"version":"v1","kind":"Secret","name":"db","namespace":"app"},
			"drifts":[{"path":"/data/password","valueInHub":"` + secretB64 + `","valueInMember":"` + secretToken + `"}],
			"diffs":[{"path":"/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration","valueInMember":"` + secretB64 + `"}]}],
			"takeovers":[{"resource":{"group":"","version":"v1","kind":"Secret","name":"db"},"diffs":[{"path":"/stringData","valueInHub":"{\"token\":\"` + secretToken + `\"}"}]}]}`,
		"a status's drifted placement": `{"driftedPlacements":[{"version":"v1","kind":"Secret","name":"db","observedDrifts":[{"path":"/","valueInHub":"` + secretB64 + `"}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			out, changed := RedactSecrets([]byte(doc))
			if !changed {
				t.Fatal("nothing redacted")
			}
			if !json.Valid(out) {
				t.Fatalf("not JSON: %s", out)
			}
			for _, s := range []string{secretValue, secretB64, secretToken} {
				if strings.Contains(string(out), s) {
					t.Errorf("%q is still in %s", s, out)
				}
			}
			if !strings.Contains(string(out), Redacted) {
				t.Errorf("no %s marker in %s", Redacted, out)
			}
			if !HoldsSecret([]byte(doc)) {
				t.Error("HoldsSecret = false")
			}
			again, changed := RedactSecrets(out)
			if changed || string(again) != string(out) {
				t.Errorf("redacting twice changed it again: %s", again)
			}
		})
	}
}

// What is redacted keeps its shape: the Secret's keys and everything that is not a value.
func TestRedactSecretsKeepsTheShape(t *testing.T) {
	in := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","labels":{"app":"web"}},"type":"kubernetes.io/tls","data":{"tls.crt":"` + secretB64 + `","tls.key":"` + secretB64 + `"}}`
	out, _ := RedactSecrets([]byte(in))
	var got struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Type string            `json:"type"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Name != "db" || got.Metadata.Labels["app"] != "web" || got.Type != "kubernetes.io/tls" ||
		len(got.Data) != 2 || got.Data["tls.crt"] != Redacted || got.Data["tls.key"] != Redacted {
		t.Errorf("redacted Secret = %s", out)
	}
}

func TestRedactSecretsLeavesTheRestAlone(t *testing.T) {
	for name, doc := range map[string]string{
		"a ConfigMap":                  `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"password":"not a Secret's"}}`,
		"a Secret of another group":    `{"apiVersion":"example.com/v1","kind":"Secret","metadata":{"name":"c"},"data":{"k":"v"}}`,
		"a drift of a ConfigMap":       `{"resource":{"version":"v1","kind":"ConfigMap","name":"c"},"drifts":[{"path":"/data/Secret","valueInHub":"v"}]}`,
		"not JSON":                     `kind: Secret`,
		"an envelope with no Secret":   `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"e","annotations":{"kubernetes-fleet.io/envelope-configmap":"true"}},"data":{"q.yaml":"kind: ResourceQuota # not a Secret"}}`,
		"a Secret's non-data drift":    `{"resource":{"version":"v1","kind":"Secret","name":"db"},"drifts":[{"path":"/metadata/labels/team","valueInHub":"a","valueInMember":"b"}]}`,
		"a Secret already redacted":    `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"data":{"k":"(redacted)"}}`,
		"a payload without any Secret": `{"placement":"web","index":3}`,
	} {
		t.Run(name, func(t *testing.T) {
			out, changed := RedactSecrets([]byte(doc))
			if changed || string(out) != doc {
				t.Errorf("changed to %s", out)
			}
		})
	}
}

func TestRedactSecretDiff(t *testing.T) {
	for path, redacted := range map[string]bool{
		"/": true, "/data/password": true, "/stringData": true, "/metadata/annotations": false,
		"/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration": true,
		"/metadata/labels/app": false, "/type": false,
	} {
		d := RedactSecretDiff(PatchDetail{Path: path, ValueInHub: "h", ValueInMember: "m"})
		if got := d.ValueInHub == Redacted && d.ValueInMember == Redacted; got != redacted {
			t.Errorf("%s: redacted %v, want %v", path, got, redacted)
		}
	}
	d := RedactSecretDiff(PatchDetail{Path: "/metadata/annotations", ValueInMember: `{"` + LastAppliedConfigAnnotation + `":"{}"}`, ValueInHub: `{"team":"a"}`})
	if d.ValueInMember != Redacted || d.ValueInHub != `{"team":"a"}` {
		t.Errorf("annotations: %+v, want the member's (holding last-applied) redacted and the hub's kept", d)
	}
	if d := RedactSecretDiff(PatchDetail{Path: "/data/x", ValueInHub: "h"}); d.ValueInMember != "" {
		t.Errorf("an absent value became %q", d.ValueInMember)
	}
}
