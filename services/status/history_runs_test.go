package status_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// storeRuns stores n staged update runs of placement web-2-crp (created in the order of their
// numbers from first), each having updated clusters clusters with names of 250 bytes.
func (f *fixture) storeRuns(first, n, clusters int) {
	f.t.Helper()
	if _, err := f.Pool.Exec(f.t.Context(), `
		insert into staged_updates (kind, name, placement, created_seq, object)
		select $1, 'run-' || g, 'web-2-crp', g, jsonb_build_object(
			'metadata', jsonb_build_object('name', 'run-' || g),
			'spec', jsonb_build_object('placementName', 'web-2-crp', 'resourceSnapshotIndex', '1', 'stagedRolloutStrategyName', 's'),
			'status', jsonb_build_object('stagesStatus', jsonb_build_array(jsonb_build_object('stageName', 'all',
				'clusters', coalesce((select jsonb_agg(jsonb_build_object('clusterName', repeat('c', 245) || lpad(c::text, 5, '0'),
					'conditions', jsonb_build_array(jsonb_build_object('type', 'Succeeded', 'status', 'True', 'reason', 'ClusterUpdatingSucceeded',
						'message', '', 'lastTransitionTime', '2026-11-21T12:00:00Z')))) from generate_series(1, $4) c), '[]'::jsonb)))))
		from generate_series($2::int, $3::int) g`, api.ClusterStagedUpdateRunKind, first, first+n-1, clusters); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) history(args ...string) events.PlacementHistory {
	f.t.Helper()
	var h events.PlacementHistory
	if err := json.Unmarshal([]byte(f.fleetctl(append([]string{"history", "crp", "web-2-crp", "-o", "json"}, args...)...)), &h); err != nil {
		f.t.Fatal(err)
	}
	return h
}

// fleetctl history shows the newest 1,000 runs, says how many older ones it left out and
// how to see them, and --skip-runs pages back to the oldest; runs that each name many
// clusters make smaller pages, so a reply stays under its cap.
func TestHistoryPagesStagedUpdateRuns(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	f.storePlacement(1)
	f.storeRuns(1, events.MaxHistoryRuns+5, 0)

	h := f.history()
	if len(h.Runs) != events.MaxHistoryRuns || h.RunsLeftOut != 5 || h.Runs[0].Name != "run-6" || h.Runs[len(h.Runs)-1].Name != "run-1005" {
		t.Fatalf("first page: %d runs (%s..), %d left out; want run-6..run-1005 and 5 left out", len(h.Runs), h.Runs[0].Name, h.RunsLeftOut)
	}
	table := f.fleetctl("history", "crp", "web-2-crp")
	want := "Staged update runs: 1000, the newest; 5 older left out: fleetctl history crp web-2-crp --skip-runs 1000 shows the next"
	if !strings.Contains(table, want) {
		t.Errorf("fleetctl history does not say %q:\n%s", want, table[:min(len(table), 2000)])
	}
	h = f.history("--skip-runs", "1000")
	if len(h.Runs) != 5 || h.RunsLeftOut != 0 || h.Runs[0].Name != "run-1" || h.Runs[4].Name != "run-5" {
		t.Errorf("second page: %d runs, %d left out, want run-1..run-5 and none left out", len(h.Runs), h.RunsLeftOut)
	}

	// Runs of 300 clusters with long names: about 77 KB each, a page holds what fits in
	// events.MaxHistoryRunBytes.
	if _, err := f.Pool.Exec(t.Context(), `delete from staged_updates`); err != nil {
		t.Fatal(err)
	}
	f.storeRuns(1, 400, 300)
	var skip, pages int
	seen := map[string]bool{}
	for {
		h := f.history("--skip-runs", fmt.Sprint(skip))
		pages++
		size := 0
		for _, r := range h.Runs {
			seen[r.Name] = true
			data, _ := json.Marshal(r)
			size += len(data)
		}
		if len(h.Runs) == 0 || size > events.MaxHistoryRunBytes {
			t.Fatalf("page %d: %d runs of %d bytes (bound %d)", pages, len(h.Runs), size, events.MaxHistoryRunBytes)
		}
		t.Logf("page %d: %d runs, %d bytes, %d left out", pages, len(h.Runs), size, h.RunsLeftOut)
		skip += len(h.Runs)
		if h.RunsLeftOut == 0 {
			break
		}
		if h.RunsLeftOut != 400-skip {
			t.Fatalf("page %d says %d left out, want %d", pages, h.RunsLeftOut, 400-skip)
		}
	}
	if pages < 2 || len(seen) != 400 {
		t.Errorf("%d page(s) showed %d runs, want every one of 400 over several pages", pages, len(seen))
	}
}

// TestGetARunOnFiveThousandClusters: a staged update run that updated every cluster of a
// 5,000-cluster placement (each named with 250 bytes, the worst case) reaches fleetctl get
// in pieces; the whole reply is far under events.QueryReplyMaxBytes, so it needs no paging.
func TestGetARunOnFiveThousandClusters(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	w := watchReplies(t, f.NATSURL)
	f.storeRuns(1, 1, fleetSize)
	out := f.fleetctl("get", "clusterstagedupdaterun", "run-1", "-o", "json")
	var run api.ClusterStagedUpdateRun
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatal(err)
	}
	if len(run.Status.StagesStatus) != 1 || len(run.Status.StagesStatus[0].Clusters) != fleetSize {
		t.Fatalf("fleetctl get shows %d stage(s)", len(run.Status.StagesStatus))
	}
	largest := w.check(t, 1)
	t.Logf("a run of %d clusters: %d bytes of JSON (cap %d), the largest reply message %d bytes (bound %d)",
		fleetSize, len(out), events.QueryReplyMaxBytes, largest, events.QueryReplyPieceBytes)
	if len(out) > events.QueryReplyMaxBytes/8 {
		t.Errorf("a run of %d clusters takes %d bytes, an eighth of the cap or more: page it", fleetSize, len(out))
	}
}
