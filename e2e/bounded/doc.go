// Package bounded holds the bounded-events test: the scheduler, rollout and
// status services on a real bus and database placing one PickAll placement
// over 5,000 members, while no message on the bus grows with the fleet. It
// needs no member clusters (no apply workers run); its test is skipped with
// -short.
package bounded
