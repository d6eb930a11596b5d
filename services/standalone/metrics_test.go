package standalone

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"
)

// checkMetrics waits until the metrics endpoint of a standalone that has
// placed the quick-start example shows every service's work: what `curl
// <metrics url>` shows after the quick start.
func checkMetrics(t *testing.T, url string) {
	t.Helper()
	want := []string{
		`flotilla_events_consumed_total\{consumer="scheduler",service="scheduler",type="io.flotilla.placement.upserted.v1"\} [1-9]`,
		`flotilla_events_consumed_total\{consumer="rollout",service="rollout",type="io.flotilla.placement.scheduled.v2"\} [1-9]`,
		`flotilla_events_consumed_total\{consumer="status",service="status",type="io.flotilla.work.reported.v1"\} [1-9]`,
		`flotilla_events_consumed_total\{consumer="apply-member-1",service="apply",type="io.flotilla.work.desired.v1"\} [1-9]`,
		`flotilla_events_published_total\{service="apply",type="io.flotilla.work.reported.v1"\} [1-9]`,
		`flotilla_event_handler_duration_seconds_count\{consumer="status",service="status",type="io.flotilla.work.reported.v1"\} [1-9]`,
		`flotilla_consumer_pending_messages\{consumer="status",service="status",stream="EVENTS"\} \d`,
		`flotilla_consumer_pending_messages\{consumer="apply-member-2",service="apply",stream="WORK"\} \d`,
		`flotilla_outbox_pending_events \d`,
		`flotilla_outbox_oldest_pending_age_seconds \d`,
		`flotilla_placements\{condition="ClusterResourcePlacementAvailable",service="status",status="True"\} 1`,
		`flotilla_placement_time_to_available_seconds_count\{service="status"\} [1-9]`,
		`flotilla_apply_results_total\{condition="Applied",member="member-1",reason="ApplySucceeded",service="apply"\} [1-9]`,
		`flotilla_drifted_manifests\{member="member-2",service="apply"\} 0`,
		`process_resident_memory_bytes \d`,
	}
	waitFor(t, "every service's metrics at "+url, func(ctx context.Context) (any, error) {
		body, err := get(ctx, url)
		if err != nil {
			return nil, err
		}
		for _, w := range want {
			if !regexp.MustCompile(`(?m)^` + w).MatchString(body) {
				return nil, fmt.Errorf("no line matching %s", w)
			}
		}
		return nil, nil
	})
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}
