package plugins

import (
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

func TestEligibility(t *testing.T) {
	fresh := spec("fresh")
	notJoined := spec("not-joined")
	notJoined.Joined = false
	leaving := spec("leaving")
	leaving.Leaving = true
	stale := spec("stale")
	stale.LastHeartbeat = now.Add(-3*time.Minute - time.Second)
	staleHeld := spec("stale-held")
	staleHeld.LastHeartbeat = stale.LastHeartbeat
	never := spec("never")
	never.LastHeartbeat = time.Time{}
	slow := spec("slow-beat") // 10 minute period: 20 minutes of silence is fine
	slow.HeartbeatPeriod = 10 * time.Minute
	slow.LastHeartbeat = now.Add(-20 * time.Minute)

	c, set := fleet(t, &framework.Policy{Type: framework.PickAll}, fresh, notJoined, leaving, stale, staleHeld, never, slow)
	c.MarkHeld(get(t, set, "stale-held"))

	for _, tc := range []struct {
		name string
		want framework.ReasonCode
		says string
	}{
		{"fresh", "", ""},
		{"not-joined", framework.ReasonNotJoined, "has not joined"},
		{"leaving", framework.ReasonLeaving, "leaving"},
		{"stale", framework.ReasonHeartbeatMissed, "the last was 3m1s ago, more than 3 periods of 1m0s"},
		{"stale-held", "", ""},
		{"never", framework.ReasonHeartbeatMissed, "not reported a heartbeat"},
		{"slow-beat", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := filter(Eligibility{}, c, get(t, set, tc.name))
			if got.Code != tc.want || !strings.Contains(got.Message, tc.says) {
				t.Errorf("Filter = %+v, want code %q saying %q", got, tc.want, tc.says)
			}
		})
	}
}
