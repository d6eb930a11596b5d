// Package sim simulates member clusters for benchmarks: members that join the fleet,
// heartbeat with cluster properties, consume their work and report on it with the real
// apply worker's protocol, without a Kubernetes API server behind them. Thousands fit in
// one process. It is a benchmark driver, never part of the product.
//
//	fleet, err := sim.New(sim.Options{JetStream: js, Members: 1000, ApplyDelay: sim.Uniform(50*time.Millisecond, 500*time.Millisecond)})
//	go fleet.Run(ctx)
//	<-fleet.Joined()
//
// # What a member does
//
//   - It joins: a MemberJoined (the MemberCluster `fleetctl apply` would publish) with labels
//     from Options.Labels (DefaultSpread: region, zone and environment spread evenly, plus
//     flotilla.dev/simulated=true) and heartbeatPeriodSeconds, then a heartbeat at once and
//     every HeartbeatPeriod (the first period shortened by a draw, so that members that joined
//     together do not beat together). Heartbeats carry the properties and resource usage the
//     real worker computes from Node objects, for 3-50 nodes of 8 cores and 32 GiB, steady
//     so that the scheduler has no reason to reschedule on each beat.
//   - It consumes its work exactly as the real worker does: bus.EnsureApplyConsumer (the
//     durable apply-<cluster>, filtered to flotilla.work.<cluster>.>, last per subject) read
//     with bus.Consume and events.Validate, so bad messages are dead-lettered, redeliveries
//     and older messages are ignored by stream sequence, and a placement is queued at most
//     once however many changes arrive. It skips the real worker's replay (an ephemeral
//     consumer reading the last message per subject before consuming): a fresh member has
//     nothing to replay, and the durable consumer delivers the same set.
//   - Every WorkDesired goes through decodeWork, the one place that reads work off the bus;
//     manifests that travel as a blob beside the event (ManifestsRef) are fetched there
//     with bus.GetBlob, as the real worker's resolve fetches them.
//   - After ApplyDelay it reports a WorkReported on flotilla.workstatus.<cluster>.<placement>,
//     as the applier would on a member that accepts every write: each manifest's identity
//     from manifest.Parse (envelopes unwrapped, undecodable and duplicate manifests failed
//     with the contract's reasons), Applied, and Available judged by the real availability
//     rules (package availability) on the object as a ready member shows it (every replica
//     available, a cluster IP, a CRD established); a not-trackable object counts as
//     available UnavailablePeriodSeconds after its apply, with a second report then, as the
//     real worker sends. Summaries, messages, the report digest (an unchanged report is not
//     sent again) and the event id are the real worker's. With SeparateAvailability the
//     first report says every manifest is not available yet and a second one,
//     AvailableDelay later, says available.
//   - At FailureRate an apply fails one manifest (ManifestApplyFailed) and is retried with
//     the real worker's backoff. Delays and failures are drawn from the seed, the member,
//     the placement, its desired state and the attempt, so a run replays exactly.
//   - A tombstone is answered with Deleted: true, "Removed N object(s) the placement owned"
//     (or Abandoned), N being the objects its applies left there.
//
// The parity test (TestSimulatedMembersMatchRealOnes) runs the standalone stack with two
// real members and their real apply workers, joins two simulated members beside them,
// places the same objects on each pair and requires the same placement status (`fleetctl
// get crp -o json`, names and times normalised), the same last reports and the same answers
// to the tombstones.
//
// # How members consume, and what it costs
//
// Per member (PerMember, the default) is the real protocol: one durable consumer per member
// on the WORK stream and one bus.Consume each, all on one NATS connection as the
// standalone's workers share one. Measured on the 2-core development machine with
// `go run ./e2e/bench/fleet -hub=false -idle 60s` (an embedded NATS server and the fleet in
// one process, nothing else):
//
//	members   consumers    join (all + first beat)   peak RSS   goroutines   CPU over ~70 s
//	1,000     per member   2.4 s                     177 MiB     9,062        4 s
//	5,000     per member   8.6 s                     668 MiB    45,062       13 s
//	5,000     shared       1.4 s                      97 MiB        71        4 s
//
// That is about 9 goroutines and 110 KiB (NATS server's share included) per member; idle,
// each consumer's pull is renewed every 30 s and heartbeats every 15 s (about 500 small
// messages a second at 5,000), which costs little. It fits, so per member is the default.
// Shared (one durable consumer, SharedConsumer, over flotilla.work.>, handing each message
// to its member) is not the real protocol (a member's credentials could never allow it)
// and serialises every member's work through one handler; use it only to load the hub
// with more members than the machine can hold consumers for.
//
// The NATS server bounds the consumers of a stream that sets no MaxConsumers to 1,000 by
// default (nats-server's JSDefaultMaxConsumersPerStream, applied to the WORK stream too), so
// past 1,000 per-member consumers it needs default_max_consumers raised (the benchmark's
// -nats-max-consumers). Joining thousands of members at once queues the JetStream API:
// bus.Consume waits while its first look at its consumer times out (it used to give up, and
// the fleet started it again, counted in Stats.ConsumerRestarts).
package sim
