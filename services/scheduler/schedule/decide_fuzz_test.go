package schedule_test

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// decodePayload decodes and validates a payload as the scheduler's consumer
// does (events.Decode); nil when it would be dead-lettered.
func decodePayload[T any](t *testing.T, typ string, data []byte) *T {
	t.Helper()
	ev := cloudevents.New()
	ev.SetID("fuzz")
	ev.SetSource("/fuzz")
	ev.SetType(typ)
	if err := ev.SetData("application/json", data); err != nil {
		t.Fatal(err)
	}
	p, err := events.DecodeAs[T](ev)
	if err != nil {
		return nil
	}
	return p
}

// FuzzDecide schedules an arbitrary placement over arbitrary members, each
// as the scheduler receives them: a placement.upserted payload, and JSON
// arrays of member.joined and member.heartbeat payloads. What the scheduler
// accepts (a placement that validates, members that validate, heartbeats
// that decode) compiles into a policy and builds into members; and the
// decision chooses members, each once, in name order, no more than PickN's
// number or outside PickFixed's names, as many as needed when fulfilled; it
// is deterministic; and deciding again with nothing changed changes nothing.
func FuzzDecide(f *testing.F) {
	read := func(name string) []byte {
		data, err := os.ReadFile("../../../events/testdata/payloads/" + name)
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	placement, joined, heartbeat := read("placement.upserted.v1.json"), read("member.joined.v1.json"), read("member.heartbeat.v1.json")
	f.Add(placement, []byte("["+string(joined)+"]"), []byte("["+string(heartbeat)+"]"))
	f.Add([]byte(`{"placement":{"metadata":{"name":"p"},"spec":{"resourceSelectors":[{"group":"","version":"v1","kind":"Namespace","name":"n"}],
		"policy":{"placementType":"PickN","numberOfClusters":2,"affinity":{"clusterAffinity":{
		"requiredDuringSchedulingIgnoredDuringExecution":{"clusterSelectorTerms":[{"propertySelector":{"matchExpressions":[{"name":"kubernetes-fleet.io/node-count","operator":"Ge","values":["2"]}]}}]},
		"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":50,"preference":{"propertySorter":{"name":"resources.kubernetes-fleet.io/available-cpu","sortOrder":"Descending"}}}]}},
		"topologySpreadConstraints":[{"topologyKey":"zone","maxSkew":1}],"tolerations":[{"key":"gpu","operator":"Exists"}]}}}}`),
		[]byte(`[{"member":{"metadata":{"name":"a","labels":{"zone":"1"}}}},{"member":{"metadata":{"name":"b","labels":{"zone":"2"}},"spec":{"taints":[{"key":"gpu","effect":"NoSchedule"}]}}},{"member":{"metadata":{"name":"c"}}}]`),
		[]byte(`[{"name":"a","healthy":true,"properties":{"kubernetes-fleet.io/node-count":{"value":"3"}},"resourceUsage":{"available":{"cpu":"2"}},"observedAt":"2025-06-01T11:59:50Z"},
		{"name":"b","healthy":true,"properties":{"kubernetes-fleet.io/node-count":{"value":"1"}},"observedAt":"2025-06-01T11:59:50Z"}]`))
	f.Add([]byte(`{"placement":{"metadata":{"name":"p"},"spec":{"resourceSelectors":[{"group":"","version":"v1","kind":"Namespace","name":"n"}],"policy":{"placementType":"PickFixed","clusterNames":["b","x"]}}}}`),
		[]byte(`[{"member":{"metadata":{"name":"a"}}},{"member":{"metadata":{"name":"b"}}}]`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, placementData, membersData, heartbeatsData []byte) {
		if len(placementData)+len(membersData)+len(heartbeatsData) > 64<<10 {
			return
		}
		now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
		p := decodePayload[events.PlacementUpserted](t, events.TypePlacementUpserted, placementData)
		if p == nil {
			return
		}
		crp := p.Placement
		api.SetDefaults(&crp)
		if errs := api.ValidatePlacement(&crp); len(errs) > 0 {
			return // the scheduler refuses it
		}
		policy, err := schedule.CompilePolicy(crp.Spec.Policy)
		if err != nil {
			t.Fatalf("a valid placement's policy does not compile: %v", err)
		}

		var joinedRaw, beatsRaw []json.RawMessage
		if json.Unmarshal(membersData, &joinedRaw) != nil || json.Unmarshal(heartbeatsData, &beatsRaw) != nil || len(joinedRaw) > 64 || len(beatsRaw) > 64 {
			return
		}
		byName := map[string]*api.MemberCluster{}
		beats := map[string]time.Time{}
		for _, raw := range joinedRaw {
			j := decodePayload[events.MemberJoined](t, events.TypeMemberJoined, raw)
			if j == nil {
				continue
			}
			mc := j.Member
			api.Default(&mc)
			if len(api.ValidateMemberCluster(&mc)) > 0 {
				continue
			}
			if prev := byName[mc.Name]; prev != nil {
				mc.Status = prev.Status // as the scheduler keeps a member's properties
			}
			byName[mc.Name] = &mc
		}
		for _, raw := range beatsRaw {
			hb := decodePayload[events.MemberHeartbeat](t, events.TypeMemberHeartbeat, raw)
			if hb == nil || byName[hb.Name] == nil {
				continue
			}
			byName[hb.Name].Status.Properties = hb.Properties
			byName[hb.Name].Status.ResourceUsage = hb.ResourceUsage
			beats[hb.Name] = hb.ObservedAt
		}
		var members []*framework.Member
		for _, mc := range byName {
			spec := schedule.MemberSpecFrom(mc)
			spec.Joined, spec.LastHeartbeat = true, beats[mc.Name]
			m, err := framework.NewMember(spec)
			if err != nil {
				t.Fatalf("member %s passed the scheduler's checks but cannot be scheduled: %v", mc.Name, err)
			}
			members = append(members, m)
		}
		set := framework.NewMemberSet(members...)

		d := schedule.Decide(policy, set, nil, now)
		if again := schedule.Decide(policy, set, nil, now); mustJSON(t, again) != mustJSON(t, d) {
			t.Fatalf("Decide is not deterministic:\n%s\n%s", mustJSON(t, d), mustJSON(t, again))
		}
		names := d.ChosenNames()
		if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("chosen %v: not in name order, or a cluster twice", names)
		}
		for _, n := range names {
			if byName[n] == nil {
				t.Fatalf("chose %q, not a member", n)
			}
		}
		switch pol := crp.Spec.Policy; pol.PlacementType {
		case api.PickNPlacementType:
			if len(names) > int(*pol.NumberOfClusters) {
				t.Fatalf("PickN %d chose %d clusters", *pol.NumberOfClusters, len(names))
			}
		case api.PickFixedPlacementType:
			for _, n := range names {
				if !slices.Contains(pol.ClusterNames, n) {
					t.Fatalf("PickFixed %v chose %q", pol.ClusterNames, n)
				}
			}
		}
		if d.Fulfilled && d.Found() != d.Needed {
			t.Fatalf("fulfilled with %d of %d clusters", d.Found(), d.Needed)
		}
		if next := schedule.Decide(policy, set, d, now); next.Changed(d) {
			t.Fatalf("deciding again with nothing changed changed the decision:\n%s\n%s", mustJSON(t, d), mustJSON(t, next))
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
