package change

import (
	"fmt"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// DisruptionUpserted publishes a ClusterResourcePlacementEviction or a
// ClusterResourcePlacementDisruptionBudget without status or server metadata:
// an eviction's status is the scheduler's.
func DisruptionUpserted(obj api.Object) (Change, error) {
	var payload events.DisruptionUpserted
	switch o := obj.(type) {
	case *api.ClusterResourcePlacementEviction:
		c := *o
		c.ObjectMeta = userMetadata(c.ObjectMeta)
		c.Status = api.PlacementEvictionStatus{}
		payload.ClusterResourcePlacementEviction = &c
	case *api.ClusterResourcePlacementDisruptionBudget:
		c := *o
		c.ObjectMeta = userMetadata(c.ObjectMeta)
		payload.ClusterResourcePlacementDisruptionBudget = &c
	default:
		return Change{}, fmt.Errorf("%T is not an eviction or a disruption budget", obj)
	}
	return disruptionChange(events.TypeDisruptionUpserted, payload.Key(), payload)
}

// DisruptionDeleted deletes an eviction or a disruption budget.
func DisruptionDeleted(k events.DisruptionKey) (Change, error) {
	return disruptionChange(events.TypeDisruptionDeleted, k, events.DisruptionDeleted{Object: k})
}

func disruptionChange(typ string, k events.DisruptionKey, payload any) (Change, error) {
	subject, err := events.DisruptionSubject(k)
	if err != nil {
		return Change{}, err
	}
	return Change{Type: typ, Subject: subject, EventSubject: k.String(), Payload: payload}, nil
}
