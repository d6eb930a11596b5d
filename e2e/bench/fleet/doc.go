package main

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
