// Package scenarios plays the seed documents end to end, as a user meets them: the whole of
// Flotilla in one process (package standalone: embedded NATS with JetStream, a local
// PostgreSQL, the scheduler, rollout and status services, and an apply worker per member)
// with four real member clusters (kube-apiserver, etcd and kube-controller-manager each, with
// a simulated node so that Deployments become available). The tests drive it with fleetctl's
// own command line (apply, get -o json/jsonpath, takeovers, delete, wait) and look at the
// members with client-go.
//
// One stack serves every test in the binary; each test uses placement, namespace and object
// names of its own and deletes its placements when it ends. Run them with `make e2e`.
//
//	seed 000/002  TestSeed000TakeoverStory
//	seed 001      TestSeed001PickAllWithRequiredAffinity, TestSeed001PickFixed,
//	              TestSeed001PickNWithAffinities, TestSeed001PickNWithTopologySpread,
//	              TestSeed001RollingUpdateKeepsWithinMaxUnavailable,
//	              TestSeed001ScaleOutAddsWithoutMoving, TestSeed001MemberLeavesAndIsReplaced
//	seed 003      TestSeed003EnvelopeIsUnwrappedOnTheMember, TestSeed003EnvelopeFailureNamesTheEnvelope
//	seed 004      TestSeed004FederalizationAdoptsWithoutRestart
//	overrides     TestOverridesDifferPerMember
//	scopes        TestSelectionScopes
//	staged runs   TestStagedUpdateRunWithApprovalThenRollback
//	failover      TestFailoverMovesALostMemberAndRemovesItsCopyOnlyOnceItIsBack (its own stack of
//	              three members whose API servers it stops and starts; failback as a subtest)
//	eviction      TestDrainUnderADisruptionBudget
//	envelopes     TestEnvelopesAreAppliedOnTheMember
package scenarios
