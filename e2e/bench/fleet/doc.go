package main

// The suite (make bench-scale: go run ./e2e/bench/fleet -suite -members 1000 -pick 100
// -timeout 3m) runs KubeFleet's scenarios with nats-server and each hub service its own
// process, built from this tree, the simulated fleet in this process: join 1,000 members;
// one PickN 100 placement to Applied and Available, 10 runs; 1,000 placements of PickN 100
// (a namespace and a ConfigMap each; 100,000 bindings), then the 10 runs again; PickAll
// over the 1,000 and a change of its objects on the hub; a restart of each service (stopped,
// a new placement applied while it is down, started: the time until it is ready, until the
// new placement is Available, and until its consumer has taken in what it missed with every
// placement Available that was before); 4,000 more members and PickAll over the 5,000; peak
// RSS and CPU time of each process, PostgreSQL's database size, events per second through
// each consumer in the burst of 1,000 placements. Every wait is bounded (-timeout, and
// -burst-timeout, -big-timeout); a scenario not reached is a row saying so, with why below
// the table, and the suite goes on.
//
// make bench-scale at 6b59ca1 (before the scheduler fix below), 22 m 47 s, on this machine
// (2 cores shared with other sessions' builds and test suites, load average 12-20
// throughout: every figure is noisy and CPU-starved):
//
//	scenario                                                                 Flotilla                 KubeFleet                     KubeFleet/Flotilla  goal
//	-----------------------------------------------------------------------  -----------------------  ----------------------------  ------------------  ---------------
//	join 1,000 clusters (taken in by the hub)                                6.01s                    -                             -                   -
//	  hub memory after the join (RSS, all services)                          207 MiB                  -                             -                   -
//	PickN 100 of 1,000 to Applied+Available, p50 / p90 of 10                 1.21s / 1.55s            p90 20s                       13x                 < 1s: NOT met
//	1,000 placements, PickN 100 each                                         NOT reached (see below)  -                             -                   -
//	PickN 100 with the placements present, 10 runs                           NOT reached (see below)  -                             -                   -
//	a hub change to a placement on 1,000 clusters                            NOT reached (see below)  -                             -                   -
//	restart of scheduler, 1,013 placements: ready / new placement Available  239ms / 33.15s           -                             -                   < 10s: NOT met
//	  until every placement is reconciled                                    33.15s                   hub agent re-sync p90 11m15s  20x                 < 10s: NOT met
//	restart of rollout, 1,014 placements: ready / new placement Available    86ms / 1.42s             -                             -                   < 10s: met
//	  until every placement is reconciled                                    1.42s                    hub agent re-sync p90 11m15s  475x                < 10s: met
//	restart of status, 1,015 placements: ready / new placement Available     130ms / 1.3s             -                             -                   < 10s: met
//	  until every placement is reconciled                                    1.31s                    hub agent re-sync p90 11m15s  517x                < 10s: met
//	PickAll over 5,000                                                       NOT reached (see below)  -                             -                   -
//	peak RSS / CPU time of nats-server                                       602 MiB / 2m23s          -                             -                   -
//	peak RSS / CPU time of scheduler                                         53 MiB / 1m47s           -                             -                   -
//	peak RSS / CPU time of rollout                                           64 MiB / 3m20s           -                             -                   -
//	peak RSS / CPU time of status                                            211 MiB / 4m14s          -                             -                   -
//	peak RSS, all services together (nats-server included)                   930 MiB                  hub agent 16-24 GB            18x                 < 1024 MiB: met
//	peak RSS of the simulated fleet (this process)                           1555 MiB                 -                             -                   -
//	PostgreSQL database size                                                 1204 MiB                 -                             -                   -
//
// Not reached: the 1,000 placements did not settle within 12 minutes (the bound then; now
// 18); the runs with them present and the PickAll over 1,000 then waited behind that
// backlog; the 4,000 joins for PickAll over 5,000 were not taken in by the scheduler
// within 3 minutes (fixed since, below).
//
// Again at fca5d24 (the burst's bound 18 minutes; still before the scheduler fix), 27 m 4 s:
// join 4.4 s; PickN 100 of 1,000 p50 / p90 1.52 s / 3.02 s; the 1,000 placements not settled
// after 18 minutes (rollout 28,137 and status 26,286 events behind, draining); the runs with
// them present not reached; PickAll over 1,000 Available in 2 m 3 s (behind the end of that
// backlog); a hub change to it Available on 1,000 clusters in 8.37 s; restarts: scheduler
// ready 339 ms, new placement 1.38 s, all reconciled 2.39 s; rollout 99 ms / 1.53 s / 1.53 s;
// status 148 ms / 1.13 s / 1.13 s; PickAll over 5,000 not reached (the scheduler 8,374
// behind on the joins); peak RSS 913 MiB for the four hub processes (nats-server 587 MiB,
// status 209 MiB, rollout 60 MiB, scheduler 57 MiB); PostgreSQL 1.2 GB.
//
// What it found:
//
//   - One PickN 100 of 1,000 placement is Applied and Available everywhere in 1.2 s p50,
//     1.6 s p90 (KubeFleet: p90 20 s). Of that, the members' simulated applies take 50-500
//     ms; the rest is the hub's hops (fleetctl, rollout snapshot window of 50 ms, scheduler,
//     rollout, work, report, rollout, status) on a loaded machine.
//   - 1,000 placements at once do not settle within 12 minutes: the members have reported
//     100,000 times after 9 minutes (work leaves the rollout's outbox at about 200 a
//     second, with "no ack from JetStream in time" retries), but while reports keep coming
//     the rollout takes them in at 25-50 a second and the status service at 50-100 a
//     second, both 80,000-100,000 events behind; once the reports stop, they drain the
//     rest in about 6 minutes. Each report costs its placement's reconcile (rollout) and its
//     whole status loaded and folded (status: loadPlacement's jsonb_agg over every report,
//     the busiest statement in pg_stat_activity samples), and the reports of one placement
//     are spread over the stream among those of hundreds of others. That is the next thing
//     to fix: fold and reconcile from what changed rather than from the whole placement,
//     and consume placements in parallel rather than as one stream of batches.
//   - A restart: the rollout and the status service serve a new placement 1.3-1.4 s after
//     they start (ready in 90-130 ms), having missed nothing (their durable consumers
//     resume: no re-sync). The scheduler's restart, the first, took 33 s: most likely
//     the new placement waited behind the end of the burst's backlog in the rollout and
//     the status service, which were still draining it (not confirmed).
//   - Memory: 207 MiB for the four hub processes after the join, 930 MiB at peak (nats-server
//     602 MiB of it, the status service 211 MiB) against KubeFleet's 16-24 GB; the
//     simulated fleet of 5,000 per-member consumers 1.5 GiB; PostgreSQL 1.2 GB after
//     100,000 reports.
//
// Fixes, each measured before and after on the same command:
//
//   - The rollout reconciled a placement for every report (services/rollout reported):
//     now a batch's reports are recorded and each placement reconciled once at the batch's
//     end (reconcileLater), and a report locks its placement without reading its spec and
//     decision (lockPlacementOnly). go run ./e2e/bench/fleet -suite -members 1000 -pick 100
//     -runs 5 -placements 200 -big-members 0 -timeout 10m, services/rollout at 8599183
//     (before) and 631df39 (after): PickN 100 of 1,000 p50 / p90 5.07 s / 16.02 s before,
//     1.36 s / 1.57 s after; in the burst of 200 placements the rollout took in 14-20
//     events a second before (20,874 to 19,429 behind over 100 s) and 33-110 after (19,781
//     to 16,551 behind over 30 s, then about 33 a second).
//   - Hub changes (HubResourceUpserted) decoded every live placement's selectors to find
//     those concerned (services/rollout hubChanged): PostgreSQL now leaves out the
//     placements with no selector of the object's kind (or Namespace); with 1,000
//     placements that query and its decoding were in 15 of 40 samples of the rollout's
//     connections in pg_stat_activity during the burst. Measured only with the previous fix.
//   - Batches of up to 500 events in the rollout and the status service (100 before):
//     make bench-scale at e9ffbdf (before) and 6b59ca1 (after), with about 96,000-98,000
//     reports published: the status service was 93,447 events behind before (7 m 11 s
//     in), 77,917 after (9 m 3 s in); the rollout 101,157 before, 98,673 after, no better:
//     its reports are spread over hundreds of placements in any 500 events.
//   - The scheduler re-decided every placement for each member join, leave or changed
//     heartbeat (services/scheduler rescheduleAll): now once per batch, at its end
//     (rescheduleLater). go run ./e2e/bench/fleet -suite -members 200 -pick 10 -runs 1
//     -placements 300 -big-members 1200 -big-timeout 3m -timeout 3m -burst-timeout 5m,
//     services/scheduler at 6b59ca1 (before) and at its fix (after): 1,000 members joining
//     with 300 placements present were not taken in within 3 minutes before (the scheduler
//     still 1,899 events behind; 56 s of scheduler CPU over the run), in 44.8 s after
//     (16.5 s of scheduler CPU over the run), and PickAll over the 1,200 was then Available
//     in 32.5 s.
//
// Figures from the 2-core development machine (24 GB; other sessions' test suites running
// beside it, load average 3-6), with the defaults unless given: per-member consumers, a
// 60 s heartbeat, applies taking 50-500 ms, no failures, a namespace of 10 objects (a
// Deployment, a Service, 7 ConfigMaps).
//
// 1,000 members, PickN 100 (go run ./e2e/bench/fleet -members 1000 -pick 100, all in one
// process; the second line with -consumers shared):
//
//	consumers    joined+1st beat  hub took them in  decision  last report  Applied+Available  peak RSS  goroutines
//	per member   3.4 s            3.4 s             32 ms     629 ms       1.7 s              237 MiB   9,147
//	shared       0.5 s            2.6 s             53 ms     680 ms       3.8 s              100 MiB     157
//
// ("hub took them in": the scheduler's and the status service's consumers have acknowledged
// every join and first heartbeat. Applied and Available are read from the status service
// when its consumer has taken in the newest report, so they are as exact as its commits.)
//
// 1,000 members, PickAll (-pick 0): joined in 3.6 s, taken in by the hub in 4.4 s; the
// decision is on the bus after 260 ms, the first member has its work after 1.6 s and the last
// report is published after 5.6 s, but the placement is Applied and Available only after
// 2 m 30 s. The rollout and the status service take in the reports at about 7-10 a second:
// each WorkReported costs each of them about 100 ms for a placement on 1,000 clusters (their
// "behind" counts fall by a batch of 100 every 10 s). Peak RSS 431 MiB, CPU 1 m 6 s user +
// 19 s system over 2 m 37 s. The largest messages are the bounded pieces: query replies and
// status changes at 256 KiB, rollout progress 147 KiB, the decision 92 KiB.
//
// 5,000 members, PickAll (-members 5000 -pick 0 -nats-max-consumers 10000 -timeout 40m,
// interrupted after 16 minutes): joined, and taken in by the hub, in 14.5 s; the decision is
// on the bus after 171 ms, the first member has its work after 2.5 s, and all 5,000 reports
// are published after 8.2 s. The placement was not Applied 16 minutes later: the status
// service had folded about 2,080 of the 5,000 reports (2.2 a second) and the rollout about
// 620 (0.66 a second), so the rollout alone would take two hours, and until it has, the
// placement says RolloutStarted=Unknown and nothing after it. Behind the reports, the status
// service's consumer fell 83,000 events behind (the heartbeats, 83 a second), so 3 minutes in
// every member showed Healthy=Unknown, "No heartbeat since ... (3 periods of 1m0s missed)",
// though every member beat every minute and the scheduler (0 behind) still saw them. Peak RSS
// 1.8 GiB (Go heap 1.0 GiB), CPU 7 m 17 s user + 1 m 27 s system over 16 m 15 s in this
// process, PostgreSQL's besides. No message came near max_payload: the largest were query
// replies and status changes at their 256 KiB piece bound, rollout progress 204 KiB, the
// decision 92 KiB; 5,000 work messages of 2.0 KiB and reports of 3.4 KiB.
//
// Where that time goes (-cpuprofile over the 16 minutes): the status service's fold loads
// the whole placement for every event it folds, every report of it included
// (services/status/placement.go loadPlacement: jsonb_agg over status_reports, about 17 MB of
// JSON at 5,000 clusters, decoded with encoding/json): 157 s of the 195 s the status handler
// took. The rollout reconciles the whole placement for every report and writes every
// cluster's row (services/rollout reported → reconcile → pass.track → saveCluster per
// cluster): 49 s of its 75 s, PostgreSQL's time besides. Both are linear in the clusters per
// report, so a placement's first rollout is quadratic in its clusters.
//
// What breaks at scale:
//
//   - (Fixed since: the WORK stream now sets MaxConsumers, bus.TopologyOptions.MaxWorkConsumers,
//     20,000 by default.) Past 1,000 members, apply workers could not create their consumers: nats-server (2.15)
//     bounds every stream that sets no MaxConsumers to 1,000 consumers
//     (JSDefaultMaxConsumersPerStream, server/jetstream_api.go; applied in consumer.go), and
//     the WORK stream (events/bus/topology.go) sets none, nor do the standalone's embedded
//     server (harness/natsserver) or deploy/'s NATS configuration set
//     default_max_consumers. The 1,001st consumer fails (here sim-1002's, joining 8 at a
//     time): "ensure consumer apply-sim-1002 on WORK: nats: API error: code=400
//     err_code=10026 description=maximum consumers limit reached".
//     Each real worker also makes a replay consumer at start, so fewer than 1,000 workers
//     restarting together can hit it. -nats-max-consumers raises the bound here.
//   - Thousands of consumers created at once queue the JetStream API: with 32 members joining
//     at a time bus.Consume's first look at its consumer (js.Consumer, 5 s) timed out
//     ("consume WORK/apply-sim-0032: context deadline exceeded") and Consume gave up, which
//     stops a real worker. The simulator joins 8 at a time and starts a consumer again when
//     that happens (Stats.ConsumerRestarts).
//   - A placement on 5,000 clusters is not Applied within 16 minutes, though every member
//     reported within 8 s: the rollout and the status service fold each report at a cost
//     linear in the placement's clusters (above). Meanwhile the status service, one consumer
//     for every event, falls behind the heartbeats and shows every member unhealthy.
//   - Nothing was over NATS's 1 MiB max_payload, and no outbox row was quarantined.
