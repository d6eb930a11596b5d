// Package faults is Flotilla's fault-injection suite. It runs the services as separate
// processes, as docker-compose.yaml does (scheduler, rollout, status, and one apply worker per
// member, each built with go build), on a nats-server process built from the nats-server
// module, a real PostgreSQL and three real member clusters. While a 100-object placement
// rolls out, and while a rolling update of one does, it injects one fault at a time: kill -9
// of each service, of an apply worker while it applies, a NATS restart, a PostgreSQL restart
// and outage, a member API server down. After each it checks what a user would: every
// placement converges (Available in fleetctl get), every object is on every member, no object
// was deleted or re-created (UIDs watched on the members), nothing was dead-lettered, and the
// audit log holds every consumed event once; then it prints a table of the faults.
// TestTimedWaitSurvivesKillingTheRollout kills the rollout during a staged update run's
// timed wait and checks that the wait ends when it was due, not a whole wait later.
//
// `go test` runs a short form (a subset of the faults with short outages); FLOTILLA_FAULTS=full
// (make e2e) runs the whole matrix with a 3-minute PostgreSQL outage and a member down for
// 60 s. -short skips the suite. FLOTILLA_FAULTS_KEEP=1 keeps the stack's logs (debug level)
// and data when the suite passes too.
//
// Two waits in the convergence times are not Flotilla's own work:
//
//   - A service killed while it holds a message (the "just published" rows) has it
//     redelivered to its successor once the consumer's AckWait (30 s) has run out: JetStream
//     cannot tell a dead client from a slow one. Live handlers keep their messages with
//     InProgress, so a shorter AckWait would only risk redelivering messages still buffered.
//   - After its API server has been down, a member's own kube-controller-manager notices
//     changes only when its client-go reflectors retry, with a backoff grown during the
//     outage: measured directly on one member, with no Flotilla process running, a
//     Deployment updated right after a 20 s outage was observed by the controller 66 s
//     later (457 ms without the outage). A Deployment is Available only once its controller
//     has observed it, so the member-down rows wait for that. The apply worker renews its
//     own watches when the member is back, so it adds no such wait.
package faults
