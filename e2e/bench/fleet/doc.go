package main

// make bench-scale at ef0f102 with the scheduler's GOMEMLIMIT (the commit that adds this
// entry), 2026-11-24, later session, on a slower machine than the a974490 run below
// (the same scenarios took 1.2-1.7x the CPU), 9m in all. Every scenario is reached and
// every goal met, the hub within its memory budget: nats-server, the scheduler and the
// status service with the GOMEMLIMIT docker-compose.yaml gives them (-memory-limits,
// default nats-server=448MiB,scheduler=160MiB,status=256MiB):
//
//	scenario                                                                                                 Flotilla                             KubeFleet                     KubeFleet/Flotilla  goal
//	-------------------------------------------------------------------------------------------------------  -----------------------------------  ----------------------------  ------------------  ---------------
//	join 1,000 clusters (taken in by the hub)                                                                3.03s                                -                             -                   -
//	  hub memory after the join (RSS, all services)                                                          200 MiB                              -                             -                   -
//	PickN 100 of 1,000 to Applied+Available, p50 / p90 of 10                                                 669ms / 685ms                        p90 20s                       29x                 < 1s: met
//	1,000 placements, PickN 100 each (100,000 bindings), to Available                                        3m9s (5 placements/s)                -                             -                   -
//	  applied with fleetctl / last member report                                                             3.16s / 2m7s                         -                             -                   -
//	  cost of a placement on 100 clusters, to Available: hub CPU (nats-server included) / PostgreSQL growth  166.57ms / 1.11 MiB                  -                             -                   -
//	  events/s through the scheduler consumer in that burst (its CPU time)                                   21 (4000 events, CPU 8.19s)          -                             -                   -
//	  events/s through the rollout consumer in that burst (its CPU time)                                     570 (107500 events, CPU 1m8s)        -                             -                   -
//	  events/s through the status consumer in that burst (its CPU time)                                      629 (118600 events, CPU 50.28s)      -                             -                   -
//	  the same with 1,010 placements present                                                                 679ms / 691ms                        p90 21s                       30x                 < 1s: met
//	PickAll over 1,000 to Applied+Available                                                                  4.5s                                 -                             -                   -
//	a hub change to a placement on 1,000 clusters, to Available                                              4.56s                                -                             -                   -
//	failover: 10 of 1,000 members lost (40 copies, 4 placements of PickN 100), to replacements Available     1m18s (57.79s net of the 20s grace)  no failover                   -                   -
//	  members back to their copies removed (status and members), failback off                                7.09s                                -                             -                   -
//	  failback (after 30s): members back to Available there again, replacements' copies removed              33.33s (3.33s net of the 30s)        -                             -                   -
//	  members found lost that never went down (heartbeats taken in late) / copies moved off them             0 / 0                                -                             -                   0
//	restart of scheduler, 1,026 placements: ready / new placement Available                                  158ms / 890ms                        -                             -                   < 10s: met
//	  until every placement is reconciled                                                                    892ms                                hub agent re-sync p90 11m15s  757x                < 10s: met
//	restart of rollout, 1,027 placements: ready / new placement Available                                    74ms / 752ms                         -                             -                   < 10s: met
//	  until every placement is reconciled                                                                    753ms                                hub agent re-sync p90 11m15s  896x                < 10s: met
//	restart of status, 1,028 placements: ready / new placement Available                                     49ms / 734ms                         -                             -                   < 10s: met
//	  until every placement is reconciled                                                                    734ms                                hub agent re-sync p90 11m15s  919x                < 10s: met
//	join 4,000 more clusters (taken in by the hub)                                                           1m8s                                 -                             -                   -
//	  cost of a cluster joining (first heartbeat included): hub CPU / PostgreSQL growth                      15.97ms / 10 KiB                     -                             -                   -
//	PickAll over 5,000 to Applied+Available                                                                  21.11s                               -                             -                   -
//	peak RSS / CPU time of nats-server (GOMEMLIMIT 448MiB)                                                   462 MiB / 1m11s                      -                             -                   -
//	peak RSS / CPU time of scheduler (GOMEMLIMIT 160MiB)                                                     180 MiB / 1m13s                      -                             -                   -
//	peak RSS / CPU time of rollout                                                                           75 MiB / 1m27s                       -                             -                   -
//	peak RSS / CPU time of status (GOMEMLIMIT 256MiB)                                                        277 MiB / 1m13s                      -                             -                   -
//	peak RSS, all services together (nats-server included)                                                   994 MiB                              hub agent 16-24 GB            16x                 < 1024 MiB: met
//	peak RSS of the simulated fleet (this process)                                                           1756 MiB                             -                             -                   -
//	PostgreSQL database size                                                                                 1257 MiB                             -                             -                   -
//
// The scheduler (ef0f102) keeps decisions decoded between batches and rebuilds its member
// set once per wave of joins instead of once per join: while 4,000 members joined, 43% of
// its CPU had gone to decoding every placement's decision again on each batch of member
// events (each re-decides every placement) and 24% to re-indexing the member set. Same
// day, before (612856a) and after:
//
//	                                                 612856a       ef0f102 (no scheduler limit)   with 160MiB
//	join 4,000 more clusters                         2m11s         58.66 s                        1m8s
//	cost of a cluster joining: hub CPU / PostgreSQL  33.79 ms / 12 KiB   13.87 ms / 9.8 KiB     15.97 ms / 10 KiB
//	scheduler CPU time, whole suite                  2m17s         1m6s                           1m13s
//	scheduler peak RSS                               116 MiB       201 MiB                        180 MiB
//	PickAll over 5,000                               26.37 s       22.69 s                        21.11 s
//	PickN 100 with 1,010 placements present, p50/p90 690 / 743 ms  669 / 726 ms                   679 / 691 ms
//	peak RSS, all four hub processes                 931 MiB       1,017 MiB                      994 MiB
//
// Its cache holds 32 MiB of decisions' JSON: a PickN 100 decision over 1,000 members is
// 132 KB (the 900 clusters not chosen, each with its reason), so about 250 of the 1,026
// placements; with 16 MiB the PickN with the placements present took 1.02 / 1.08 s in one
// run (the scheduler re-decides every placement on heartbeats whose properties changed,
// and each miss decodes a decision). Smaller decisions (Fleet reports at most 20 clusters
// not chosen) would let it hold every placement in less.
//
// At 612856a (GOMEMLIMIT for nats-server and status only), the same day, 9m14s: join
// 1,000 3.66 s; PickN 725 / 749 ms, with the placements present 690 / 743 ms; burst of
// 1,000 placements 4m5s (a placement on 100 clusters: 207 ms of hub CPU, 1.14 MiB of
// PostgreSQL); hub change 4.78 s; failover 1m21s; restarts under 1.1 s; PickAll over
// 5,000 26.37 s; peak RSS nats-server 462, scheduler 116, rollout 76, status 277: 931 MiB.
//
// The memory budget, measured in the same sitting, the suite with -memory-limits none and
// then with the default (the same build; scenario times within the machine's noise):
//
//	                                         no GOMEMLIMIT           nats-server=448MiB,status=256MiB
//	peak RSS nats-server / its CPU time      765 MiB / 1m23s         463 MiB / 1m35s
//	peak RSS status / its CPU time           313 MiB / 1m19s         279 MiB / 1m15s
//	peak RSS, all four hub processes         1,270 MiB               932 MiB
//	burst of 1,000 placements                4m25s                   3m53s
//	PickAll over 5,000                       27.42 s                 27.17 s
//
// (with nats-server=400MiB: 419 MiB, CPU 1m32s, PickAll over 5,000 33.98 s). Go's
// collector lets a heap grow to twice what is live before it collects. Heap profiles
// (nats-server's --profile port) show what is live: at 5,000 members nats-server keeps
// about 260 MiB, 117 MiB of it the members' durable consumers (one each: an internal
// client, its store and queues, about 20 KiB a member) and 39 MiB of message blocks read
// for them; the status service about 130 MiB, its fold cache and a batch's events. The
// limit makes each collect sooner; nats-server pays about 14% more CPU for it.
//
// The cost rows (above): a placement on 100 clusters costs the hub 167 ms of CPU (all
// four processes, from the apply to Available with every member's report; under 2 ms a
// binding) and 1.11 MiB of PostgreSQL (decision, snapshot, work, status, history, audit
// and inbox rows: about 11 KiB a binding). A cluster joining costs 16 ms of CPU (34 ms
// before ef0f102) and 10 KiB.

// make bench-scale at a974490, 2026-11-24, this machine quiet (load average 2-3.5, the
// benchmark's own): 6m6s in all (6m42s with the build). Every scenario is reached:
//
//	scenario                                                                                              Flotilla                            KubeFleet                     KubeFleet/Flotilla  goal
//	----------------------------------------------------------------------------------------------------  ----------------------------------  ----------------------------  ------------------  -------------------
//	join 1,000 clusters (taken in by the hub)                                                             2.52s                               -                             -                   -
//	  hub memory after the join (RSS, all services)                                                       193 MiB                             -                             -                   -
//	PickN 100 of 1,000 to Applied+Available, p50 / p90 of 10                                              622ms / 652ms                       p90 20s                       31x                 < 1s: met
//	1,000 placements, PickN 100 each (100,000 bindings), to Available                                     2m12s (8 placements/s)              -                             -                   -
//	  applied with fleetctl / last member report                                                          2.92s / 1m18s                       -                             -                   -
//	  events/s through the scheduler consumer in that burst (its CPU time)                                23 (3000 events, CPU 5.96s)         -                             -                   -
//	  events/s through the rollout consumer in that burst (its CPU time)                                  805 (106000 events, CPU 42.03s)     -                             -                   -
//	  events/s through the status consumer in that burst (its CPU time)                                   905 (119160 events, CPU 49.93s)     -                             -                   -
//	  the same with 1,010 placements present                                                              648ms / 745ms                       p90 21s                       28x                 < 1s: met
//	PickAll over 1,000 to Applied+Available                                                               3.31s                               -                             -                   -
//	a hub change to a placement on 1,000 clusters, to Available                                           4.29s                               -                             -                   -
//	failover: 10 of 1,000 members lost (40 copies, 4 placements of PickN 100), to replacements Available  1m17s (56.6s net of the 20s grace)  no failover                   -                   -
//	  members back to their copies removed (status and members), failback off                             6.07s                               -                             -                   -
//	  failback (after 30s): members back to Available there again, replacements' copies removed           32.28s (2.28s net of the 30s)       -                             -                   -
//	  members found lost that never went down (heartbeats taken in late) / copies moved off them          0 / 0                               -                             -                   0
//	restart of scheduler, 1,026 placements: ready / new placement Available                               89ms / 736ms                        -                             -                   < 10s: met
//	  until every placement is reconciled                                                                 736ms                               hub agent re-sync p90 11m15s  917x                < 10s: met
//	restart of rollout, 1,027 placements: ready / new placement Available                                 46ms / 835ms                        -                             -                   < 10s: met
//	  until every placement is reconciled                                                                 836ms                               hub agent re-sync p90 11m15s  807x                < 10s: met
//	restart of status, 1,028 placements: ready / new placement Available                                  51ms / 671ms                        -                             -                   < 10s: met
//	  until every placement is reconciled                                                                 672ms                               hub agent re-sync p90 11m15s  1005x               < 10s: met
//	join 4,000 more clusters (taken in by the hub)                                                        1m16s                               -                             -                   -
//	PickAll over 5,000 to Applied+Available                                                               16.06s                              -                             -                   -
//	peak RSS / CPU time of nats-server                                                                    755 MiB / 53.3s                     -                             -                   -
//	peak RSS / CPU time of scheduler                                                                      119 MiB / 1m27s                     -                             -                   -
//	peak RSS / CPU time of rollout                                                                        69 MiB / 57.15s                     -                             -                   -
//	peak RSS / CPU time of status                                                                         337 MiB / 1m9s                      -                             -                   -
//	peak RSS, all services together (nats-server included)                                                1280 MiB                            hub agent 16-24 GB            13x                 < 1024 MiB: NOT met
//	peak RSS of the simulated fleet (this process)                                                        1810 MiB                            -                             -                   -
//	PostgreSQL database size                                                                              1341 MiB                            -                             -                   -
//
// At a5f207c (the same but the failover fix below), 10m25s: the same figures within noise
// (PickN 613 / 649 ms, with the placements present 643 / 722 ms, burst 2m12s, PickAll over
// 5,000 17.58 s, peak RSS 1,252 MiB), but the failover took 2m59s and its failback did not
// complete within 3 min: a member lost and replaced, still silent, was the next lost member's
// replacement, because the plain filters allow three missed heartbeats where failover finds a
// member down after 1.5 (fixed in a974490, TestFailoverNeverReplacesWithAMemberStillDown).
//
// The same at f5e28cd, without the scheduler's batch limit, 8m54s: the 4,000 more joins were
// not taken in within 3 min (the scheduler re-decided the 1,026 placements over 5,000
// members once per batch of 100 member events, 2.5 s each; 2,207 events behind at the
// bound), so PickAll over 5,000 was not reached; with batches of 500 the joins took 1m16s.
// The other rows were within noise of the above: PickN 626 / 655 ms alone and 639 / 695 ms
// with the 1,010 placements present; the burst of 1,000 placements 2m15s; peak RSS 1,117 MiB
// (nats-server 610, status 350).
//
// What moved the burst from "not reached in 18 min" (fca5d24) and 2m18s-2m30s for 300
// placements (51f3032) to 2m12s for 1,000: the status service's fold cache and refold
// (b65df60, e12df7c), its batch's writes sent with its next read and a batch of reports
// read in one round trip (8b99479, c23010d; BenchmarkFoldReportsAcrossPlacements 333-341 →
// 445-486 events/s), its own events acked unread (c23010d), the rollout's batched hub
// writes and its reconcile from what changed.
//
// Not met then: peak RSS of all services together, 1,117-1,280 MiB against the 1 GB goal:
// nats-server 610-755 MiB and status 324-350 MiB (its fold cache is 128 MiB by default); met since with GOMEMLIMIT (above).

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
//   - A report cost the status service its placement's every report, read and decoded
//     (services/status loadPlacement's jsonb_agg over status_reports) and folded again,
//     and the rollout one upsert per cluster of its placement (services/rollout
//     pass.track saved every scheduled cluster's row on each reconcile). Now the status
//     service reads the report of each cluster a batch's events concern and folds only
//     those clusters again (fold.Refold: the other entries are kept from the stored
//     status, the placement-level conditions counted from the entries), comparing and
//     announcing only their entries; a batch that changes more than reports (spec,
//     decision, snapshot, progress) reads every report and folds the whole status as
//     before. The rollout writes only the cluster rows a reconcile changed, and a report
//     that changes neither the summary held nor the applied time (a worker reporting
//     again) no longer re-plans the placement. Still linear in the placement's clusters
//     per batch: the status service decodes and writes the whole stored status (and the
//     decision and progress) of each placement a batch touches, and the rollout loads
//     every cluster row and plans the whole placement once per batch; next is per-cluster
//     status rows with the placement's counts beside them, and a plan that starts from
//     the cluster that changed. Commits bc7455b and e12df7c (before: 51e1765).
//     Measured with both builds side by side, at the same time (so under the same load,
//     each taking about half the machine, load average 4-13):
//     go run ./e2e/bench/fleet -suite -members 1000 -pick 100 -runs 1 -placements 300
//     -big-members 0 -timeout 3m -burst-timeout 8m, interrupted after the burst's rows:
//
//	                                                  51e1765 (before)   e12df7c (after)
//	300 placements to Available (last report at 45 s)  1m54s             1m50s
//	status service CPU in the burst (34,000 events)    26.6 s            23.1 s  (-13%)
//	rollout CPU in the burst (33,000 events)           22.9 s            16.3 s  (-29%)
//	PostgreSQL CPU, start of the run to the burst end  53 s              44 s    (-17%)
//
//     With -placements 600 -burst-timeout 14m, the same way (side by side, load average
//     10-19 over the burst):
//
//	                                                  51e1765 (before)   e12df7c (after)
//	600 placements to Available (last report ~2m8s)    4m3s              4m0s
//	status service CPU in the burst (69,000 events)    43.5 s            43.2 s
//	rollout CPU in the burst (67,000 events)           42.7 s            32.8 s  (-23%)
//	PostgreSQL CPU over the burst (07:18:03-07:22:11)  95 s              74 s    (-22%)
//
//     (PostgreSQL's CPU: its processes' utime and stime from /proc, sampled every 10 s.)
//     So at 100 clusters a placement the status service's own CPU hardly moves: what it
//     saves (reading and decoding 100 reports) it still spends decoding and encoding the
//     whole stored status; the saving is PostgreSQL's (no jsonb_agg per batch) and the
//     rollout's (one upsert per changed cluster instead of per cluster). Wall time is
//     bound by the rollout sending the work (the last report comes 2 minutes in) and
//     does not move.
//     The same suite with -runs 3 -placements 1000 -timeout 5m -burst-timeout 12m, one
//     build after the other (before 06:45-06:59 UTC, load average 10-27; after
//     06:59-07:10, load average 16-36, other sessions' test suites beside both): the
//     1,000 placements Available in 7m46s before and 9m27s after (last member report at
//     4m58s and 5m49s: the rollout sends the work slower on the busier machine); status
//     service 1m15s of CPU for 116,459 events before, 1m11s for 120,590 after; rollout
//     1m14s for 112,203 before, 56.5 s for 114,111 after. Wall times that far apart in
//     load say nothing of the fix; the CPU figures do.
//
//   - The status service decoded, for every batch, the whole decision, progress and
//     status of each placement the batch touched (a report or two each, in a burst over
//     hundreds of placements), and checked each status change it published by decoding it
//     again. Now it keeps placements decoded between batches (services/status foldCache,
//     valid for the xmin of the placement's rows, so another replica's write is seen),
//     events.New checks a typed payload by its rules without the JSON round trip, and
//     PostgreSQL compresses those values with lz4 (migration 020). In-process,
//     go test ./services/status -run XXX -bench FoldReportsAcrossPlacements -benchtime
//     5000x (500 placements x 100 clusters, reports interleaved): 122 events/s before,
//     232 with the cache, 258 with lz4 too. Side by side at f946a6e (before) and 51f3032
//     (after), go run ./e2e/bench/fleet -suite -members 1000 -pick 100 -runs 1
//     -placements 300 -big-members 0 -timeout 3m -burst-timeout 8m, stopped after the
//     burst's rows:
//
//	                                                  f946a6e (before)   51f3032 (after)
//	300 placements to Available (last report ~1m10s)   2m18s             2m30s
//	status service CPU in the burst (35,000 events)    33.8 s            25.6 s  (-24%)
//	rollout CPU in the burst (34,000 events)           25.7 s            24.4 s
//	PickN 100 with the 301 placements present          3.24 s            806 ms
//
//     The status service still writes each touched placement's whole status (177 KB of
//     JSON at 100 clusters) once per batch, and handles a batch as one serial run of
//     statements (about half of the two cores busy in the benchmark: it waits on
//     PostgreSQL round trips, not CPU). Next: per-cluster status rows (only changed entries
//     written) and the batch's statements pipelined.
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
//
// Placement preview (issue 16): -preview runs fleetctl apply --dry-run=server on the placement
// with a new version of its objects once it is Available, every simulated member answering as
// an apply worker does (sim/preview.go: NoChange, Update, Create, Delete from what it holds).
// go run ./e2e/bench/fleet -members 1000 -pick 0 -objects 10 -preview: the whole answer (the
// scheduler's decision, the rollout's render and plan, 1,000 members' answers, 64 at a time,
// 6.6 MB of JSON, 7,000 objects to update) in 0.92 s and, on a busier run, 3.03 s.
//
// Failover (-failover: the suite's failover scenario alone, after the join; see failover.go).
// go run ./e2e/bench/fleet -failover -members 1000 -pick 100 -heartbeat-period 5s -timeout 4m
// (default -failover-placements 3 and one more with failback, -failover-lost 10,
// -failover-grace 20s, -failback-after 30s, -failover-pause 0), at 9662993, 2 cores shared, load average
// 5-16 (last minute) over each run:
//
//	                                                            10 lost, 4 placements   10 lost, again    100 lost, 11 placements (-failover-lost 100 -failover-placements 10)
//	copies on the lost members                                  40                      40                1,100 (every placement lost all its 100 clusters)
//	loss to replacements Available (slowest placement)          28.4 s                  28.5 s            43.1 s
//	  net of the 20 s grace                                     8.4 s                   8.5 s             23.1 s
//	members back to their copies removed (status and members)   1.05 s                  1.05 s            8.0 s
//	failback (30 s): back to Available there, replacements gone 31.8 s (1.8 s net)      32.6 s (2.6 s)    32.3 s (2.3 s)
//	members found lost that never went down                     0                       0                 0
//	hub peak RSS (nats-server and the three services)           303 MiB                 293 MiB           386 MiB
//
// Net of the grace is detection plus the hub's work: half the lost members are silent, found
// down 1.5 heartbeat periods (7.5 s) after their last beat, so 2.5-7.5 s after the loss; the
// other half say so in their next heartbeat (0-5 s). What is left, about 1 s with 40 copies
// to move, is the decision, the replacements' applies (50-500 ms) and the status. With 1,100
// copies the status service fell 1,600 events behind and the rest took about 15 s more.
//
// Under heavier load (an earlier run at load average 19-34, the hub 29 s to take in the
// join): about 20 s after the loss, some 200 members that never went down were found lost
// ("no heartbeat arrived for 1.5 heartbeat periods of 5s", all down since the same second,
// back 20 s later); no copy moved, as no other cluster fitted. Their heartbeats reached the
// scheduler's member_clusters rows more than 27.5 s (1.5 periods and the grace) late: the
// scheduler's intake of 200 heartbeats a second, or the simulator's publishing, stalled on
// the starved machine (not told apart: that run's logs are gone). Silence is measured
// against heartbeat_at, when the bus received the heartbeat, stored only once the
// scheduler has consumed it, so a scheduler that far behind takes live members for
// silent; the failover row above then lasted 1 m 5 s.
//
// Reproduced at will with -failover-pause 40s (the scheduler stopped with SIGSTOP for 40 s,
// no member down, every member beating; same command otherwise, load average 15-17): 110
// members found lost, every copy of the four placements (400 "lost" rows in
// failover_history, all at 04:15:51.33, within seconds of the resume, "down since" 35 s
// before, "no heartbeat arrived for 1.5 heartbeat periods of 5s"; "no other cluster fits",
// so nothing moved), while the scheduler took 37.7 s to take in the 7,700 heartbeats of its
// pause. The timer loop (services/scheduler runTimers) decides as soon as the service runs
// again, before its consumer has caught up. A restarted scheduler, down longer than 1.5
// periods and the grace (5 m by default), meets the same.
//
// Fixed at f1e9a09: the scheduler judges silence as of the bus time of the newest event it
// has taken in (or now, when its consumer has nothing waiting), and a failover timer is due
// only once it has heard the fleet up to it. Same command with -failover-pause 40s, load
// average 4-6: 0 members found lost, 0 copies moved, caught up 6.03 s after the resume;
// failover 28.58 s (8.58 s net of the grace), failback 32.47 s (2.47 s net), as before.
