package kubeadmiral

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events/api"
)

// FuzzConvert decodes arbitrary bytes as a PropagationPolicy or
// ClusterPropagationPolicy file and converts it. Conversion is
// deterministic and its errors name a field of the policy; a policy that
// validates never converts into an invalid placement; and one that converts
// gives two distinct, valid placements that select disjoint objects (with and
// without the adopt label) and decode from their own JSON, as fleetctl
// publishes them.
func FuzzConvert(f *testing.F) {
	for _, p := range []string{"../cli/testdata/seeds/propagationPolicy.yaml", "../cli/testdata/invalid/members-and-policies.yaml",
		"../../../events/api/testdata/seeds/004-*"} {
		files, err := filepath.Glob(p)
		if err != nil || len(files) == 0 {
			f.Fatalf("no seed files match %s (%v)", p, err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(`apiVersion: core.kubeadmiral.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: all
  annotations: {flotilla.dev/kinds: "monitoring.coreos.com/v1/ServiceMonitor, v1/Namespace, bad"}
spec:
  schedulingMode: Divide
  maxClusters: 3
  clusterSelector: {region: eu}
  clusterAffinity:
    - matchExpressions: [{key: zone, operator: In, values: [a, b]}]
      matchFields: [{key: metadata.name, operator: NotIn, values: [m1]}]
  placement: [{cluster: m1, preferences: {weight: 200}}, {cluster: m2}]
  tolerations: [{key: k, operator: Exists, effect: NoExecute}, {key: k2, operator: Equal, value: v}]
`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		obj, err := api.Decode(data)
		if err != nil {
			return
		}
		p, ok := PolicyOf(obj)
		if !ok {
			return
		}
		valid := len(api.Validate(obj)) == 0
		conv, errs := Convert(p)
		conv2, errs2 := Convert(p)
		if mustJSON(t, conv) != mustJSON(t, conv2) || errs.Error() != errs2.Error() {
			t.Fatalf("Convert is not deterministic: %v; %v", errs, errs2)
		}
		for _, e := range errs {
			if e.Field == "" || e.Detail == "" {
				t.Fatalf("conversion error without a field: %+v", *e)
			}
		}
		for _, e := range errs {
			// The policy's own rules are Validate's and the conversion's;
			// a placement that breaks the placement rules is the converter's.
			if valid && strings.Contains(e.Detail, "cannot be converted") {
				t.Fatalf("%s validates but converts into an invalid placement: %v", p, e)
			}
		}
		if len(errs) > 0 {
			return
		}
		if conv.Keep == nil || conv.Adopt == nil || conv.Keep.Name == conv.Adopt.Name {
			t.Fatalf("conversion of %s without errors gave placements %v and %v", p, conv.Keep, conv.Adopt)
		}
		for _, crp := range conv.Placements() {
			if len(crp.Name) > maxName {
				t.Fatalf("placement name %q is longer than %d", crp.Name, maxName)
			}
			if verrs := api.ValidatePlacement(crp); len(verrs) > 0 {
				t.Fatalf("placement %s of %s is invalid: %v", crp.Name, p, verrs)
			}
			back, err := api.Decode([]byte(mustJSON(t, crp)))
			if err != nil {
				t.Fatalf("placement %s does not decode from its JSON: %v", crp.Name, err)
			}
			if verrs := api.Validate(back); len(verrs) > 0 {
				t.Fatalf("placement %s is invalid once decoded: %v", crp.Name, verrs)
			}
			if len(crp.Spec.ResourceSelectors) == 0 {
				t.Fatalf("placement %s selects nothing", crp.Name)
			}
		}
		for i, s := range conv.Keep.Spec.ResourceSelectors {
			keep, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
			if err != nil {
				t.Fatal(err)
			}
			adopt, err := metav1.LabelSelectorAsSelector(conv.Adopt.Spec.ResourceSelectors[i].LabelSelector)
			if err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{p.LabelKey(): p.Name, NamespaceLabel: p.Namespace}
			if !keep.Matches(k8slabels.Set(labels)) || adopt.Matches(k8slabels.Set(labels)) {
				t.Fatalf("an object of the policy without the adopt label: keep %v, adopt %v", keep, adopt)
			}
			labels[AdoptLabel] = AdoptValue
			if keep.Matches(k8slabels.Set(labels)) || !adopt.Matches(k8slabels.Set(labels)) {
				t.Fatalf("an object of the policy with the adopt label: keep %v, adopt %v", keep, adopt)
			}
		}
		if !strings.Contains(conv.Keep.Annotations[ConvertedFromAnnotation], p.Name) {
			t.Fatalf("placement %s does not name its policy", conv.Keep.Name)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
