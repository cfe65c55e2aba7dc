// Package raftstore is a Raft-replicated object store: the state behind
// podsafe's Kubernetes-compatible API server.
//
// Every object is JSON keyed by resource, namespace and name. Its
// resourceVersion is the raft index of the entry that last wrote it, so
// resourceVersions are totally ordered across all resources. Create, Update
// (optionally a compare-and-swap on resourceVersion and/or uid) and Delete
// are raft log entries; Get and List are linearizable reads served by the
// leader after a barrier in its term and a leadership check. Followers
// forward both to the leader. Watch is served locally by every member from a
// window of the most recent events, which every member emits in the same
// order.
//
// Outcomes are classified for a linearizability checker: ErrUnavailable only
// when the request certainly had no effect, ErrTimeout whenever it may have
// (or may yet) take effect, and every other error is the definite outcome.
//
// All traffic between members goes through the listeners and dialer in
// Config, so a simulated network can partition it. Config.StaleReads is a
// planted bug for the bug zoo: with it, a member serves reads from its own
// state, which is stale on a partitioned follower.
//
// OpenTestCluster (in testing.go) runs a cluster on loopback TCP for tests of
// this package and of code built on it.
package raftstore
