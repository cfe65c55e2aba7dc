package apiserver

import (
	"context"

	"github.com/podsafe/podsafe/raftstore"
)

// Store is what the API server needs from the replicated store; *raftstore.Store
// implements it. Reads are linearizable; Watch streams every committed change of
// one resource after fromRV, in order, exactly once.
type Store interface {
	Create(ctx context.Context, key raftstore.Key, data []byte) (raftstore.Object, error)
	Update(ctx context.Context, key raftstore.Key, data []byte, pre raftstore.Preconditions) (raftstore.Object, error)
	Delete(ctx context.Context, key raftstore.Key, pre raftstore.Preconditions) (raftstore.Object, error)
	Get(ctx context.Context, key raftstore.Key) (raftstore.Object, error)
	// List and Watch may be narrowed by an index (raftstore.ByIndex, see
	// StoreIndexes); what they return is then still a superset of what the
	// caller filters for.
	List(ctx context.Context, resource, namespace string, opts ...raftstore.Narrowing) (objs []raftstore.Object, rev uint64, err error)
	Watch(ctx context.Context, resource string, fromRV uint64, opts ...raftstore.Narrowing) (<-chan raftstore.Event, error)
}

var _ Store = (*raftstore.Store)(nil)
