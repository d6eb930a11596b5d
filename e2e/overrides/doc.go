// Package overrides tests ClusterResourceOverrides and ResourceOverrides through the
// scheduler, rollout and status services on a real bus and database, driven with fleetctl
// as a user drives them; the test plays the apply workers (it reports every work it reads
// applied and available). What the overrides do on real members is e2e/scenarios'.
package overrides
