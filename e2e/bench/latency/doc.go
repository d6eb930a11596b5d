package main

// Where Flotilla's time goes, read from the event timelines this program prints (figures
// are p50s from 10-20 run sessions on a 2-core machine that was also running other test
// suites, load average 7-15; treat them as proportions more than absolutes).
//
// Since these notes were written the rollout acted on the two findings below: the
// coalescing window is a debounce (50 ms quiet, 2 s at most: rollout.DefaultSnapshotWindow,
// DefaultSnapshotMaxWait) and the timer loop sleeps until the next due time and wakes on
// events. On a quiet machine that took a new placement to Applied=True from ~1.06 s to
// ~0.63 s p50 and a hub change to every member from ~0.57 s to ~0.23 s p50 (kubectl to the
// 3 members in turn: ~1.08 s and ~0.36 s in the same run). The analysis below is kept as
// measured.
//
// A new placement (namespace + 20 objects, PickAll over 3 members), about 1.0-1.5 s to
// Applied=True, against 1.5-2.1 s for kubectl to the 3 members in sequence:
//
//   - fleetctl publishes the 21 hub objects and the placement, each waiting for its PubAck:
//     ~50 ms.
//   - the scheduler decides within ~30-70 ms of the placement event.
//   - the rollout cuts the snapshot ~350-460 ms after the placement event. The coalescing
//     window (rollout.DefaultSnapshotWindow, 250 ms) plus the timer tick that notices its
//     end (rollout.DefaultTick, 100 ms: 0-100 ms more) account for most of it; the rest is
//     the rollout consuming the 21 hub events one transaction at a time (~10 ms each,
//     PostgreSQL commits with fsync in the standalone's persistent database). With a
//     50 ms window the snapshot still comes ~260-330 ms in: here the serial per-event
//     transactions are the floor, not the window.
//   - the work is published to the 3 members within ~10 ms of the snapshot (outbox relay,
//     woken by LISTEN/NOTIFY: not a cost).
//   - each apply worker applies the 21 manifests one after another: ~280-470 ms until a
//     member shows them all, the three members in parallel. client-go doing the same 63
//     applies all at once takes ~250 ms in total: applying a placement's manifests
//     concurrently (Namespaces and CRDs first) would save a few hundred ms here.
//   - the status service reports Applied=True ~150-260 ms after the last apply report. It
//     consumes every event (audit), so at creation it still has the 21 hub events, the
//     rollout's events and its own status events queued, one transaction each, when the
//     reports arrive. After a hub change, with little queued, this step is ~10-60 ms.
//
// A hub change (one ConfigMap edited), ~0.6-0.85 s until every member has it, against
// ~0.5 s for kubectl to 3 members in sequence:
//
//   - the snapshot is cut ~355 ms after the change: 250 ms window + 100 ms tick, i.e. more
//     than half of the whole. Out-of-tree experiments with the same program (10 runs each,
//     same machine; standalone.Config cannot set the rollout's window yet):
//
//     window/tick   maxUnavailable   members updated (watch)   Applied for new index
//     250ms/100ms   25% (default)    572 ms                    605 ms
//      50ms/100ms   25%              416 ms                    469 ms
//      50ms/ 10ms   25%              315 ms                    413 ms
//     250ms/100ms   100%             484 ms                    595 ms
//      50ms/ 10ms   100%             219 ms                    343 ms
//
//     fleetctl publishes a 21-object file in 5-25 ms, so a 50 ms window still coalesces a
//     whole apply into one snapshot. Better than a shorter fixed window: a debounce (due
//     at min(first change + max, last change + quiet)) and an in-process timer armed at the
//     due time instead of a 100 ms poll.
//   - Fleet's default maxUnavailable (25%, rounded up: 1 of 3) updates one member at a
//     time: each further member costs one work → apply → report → rollout round trip,
//     ~80-150 ms. That is the strategy working as specified, not overhead.
//   - a hub change re-opens the window of every live placement, and the timer loop
//     re-selects the due placements one transaction each, in name order: with 100 idle
//     placements that sort before the measured one (-idle-placements 100), the snapshot
//     comes ~580 ms after the change instead of ~355 ms, ~2 ms per placement, so a fleet
//     with thousands of placements would wait seconds for every hub change. Re-selecting
//     only the placements whose selectors can match the changed object (by kind, and
//     namespace or name) removes that.
