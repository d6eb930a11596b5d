package schedule_test

import (
	"fmt"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

func ExampleDecide() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var list []*framework.Member
	for name, region := range map[string]string{"east-1": "east", "east-2": "east", "west-1": "west"} {
		m, err := framework.NewMember(framework.MemberSpec{
			Name: name, Labels: map[string]string{"region": region},
			Joined: true, LastHeartbeat: now,
		})
		if err != nil {
			panic(err)
		}
		list = append(list, m)
	}
	members := framework.NewMemberSet(list...)

	two := int32(2)
	policy, err := schedule.CompilePolicy(&api.PlacementPolicy{
		PlacementType:             api.PickNPlacementType,
		NumberOfClusters:          &two,
		TopologySpreadConstraints: []api.TopologySpreadConstraint{{TopologyKey: "region"}},
	})
	if err != nil {
		panic(err)
	}

	d := schedule.Decide(policy, members, nil, now)
	for _, c := range d.Chosen {
		fmt.Println(c.Action, c.Message())
	}
	for _, u := range d.NotChosen {
		fmt.Println("not chosen:", u.Cluster, "-", u.Reason)
	}

	// Later, east-1 leaves the fleet: the previous decision keeps west-1 and
	// replaces east-1.
	d = schedule.Decide(policy, members.Without("east-1"), d, now.Add(time.Minute))
	fmt.Println(d.ChosenNames(), d.Removed[0].Cluster, d.Removed[0].Reason.Code)
	// Output:
	// added Successfully scheduled resources for placement in "east-1" (affinity score: 0, topology spread score: -1): picked by scheduling policy
	// added Successfully scheduled resources for placement in "west-1" (affinity score: 0, topology spread score: 1): picked by scheduling policy
	// not chosen: east-2 - the placement already has the 2 clusters its policy asks for
	// [east-2 west-1] east-1 ClusterLeft
}
