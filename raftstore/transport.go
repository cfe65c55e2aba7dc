package raftstore

import "github.com/hashicorp/raft"

// transport is raft's NetworkTransport without pipelined replication.
//
// raft 1.7's pipeline can deadlock on shutdown: when the leader steps down or
// closes while a follower's link is black-holed, the pipeline's response
// decoder blocks handing a finished future to a consumer that has already
// stopped, the sender then blocks handing it the next one, and the replication
// goroutine that would close the pipeline waits on the sender, so
// raft.Shutdown never returns. Without a pipeline every AppendEntries is a
// plain request/response bounded by the transport timeout, which also makes
// every replication RPC pass through the simulated network's rules one at a
// time. Embedding keeps every other capability (pre-vote, closing).
type transport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline refuses, so raft falls back to synchronous
// AppendEntries.
func (transport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

var (
	_ raft.Transport   = transport{}
	_ raft.WithPreVote = transport{}
	_ raft.WithClose   = transport{}
)
