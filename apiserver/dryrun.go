package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/raftstore"
)

// Server-side dry run (dryRun=All; kubectl --dry-run=server, kubectl diff):
// a write runs every step a real one runs — decoding, defaulting,
// authority, admission, validation, the store's preconditions — and answers
// with the object it would have stored, but the store is not written. The
// API server's store is wrapped in dryRunStore, which turns the writes of a
// dry-run request (marked in its context) into reads that check what the
// write would have checked. A dry run writes nothing, so nothing (not the
// priority-class cache, not a cluster IP) remembers it.

type dryRunKey struct{}

// withDryRun marks ctx's writes as dry.
func withDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

// isDryRun reports whether ctx's writes are dry.
func isDryRun(ctx context.Context) bool { v, _ := ctx.Value(dryRunKey{}).(bool); return v }

// dryRunParam reads the dryRun values of a write: "All" is a dry run, none
// a real write, anything else 400 as kube-apiserver answers it.
func dryRunParam(values []string) (bool, error) {
	for _, v := range values {
		if v != metav1.DryRunAll {
			return false, apierrors.NewBadRequest(fmt.Sprintf("dryRun: Unsupported value: %q: supported values: %q", v, metav1.DryRunAll))
		}
	}
	return len(values) > 0, nil
}

// dryRunQuery reads the dryRun parameter of a request's query.
func dryRunQuery(q url.Values) (bool, error) { return dryRunParam(q["dryRun"]) }

// dryRunStore is the API server's store: writes in a dry-run context only
// check what the write would check.
type dryRunStore struct {
	Store
	clock clock.PassiveClock // stamps a dry create's creationTimestamp, as the store would
}

// Create implements Store: a dry create fails as the real one would when
// the key exists, and returns the object unstored, with the uid and
// creationTimestamp the store would have given it and no resourceVersion,
// as kube-apiserver's dry-run create.
func (s dryRunStore) Create(ctx context.Context, key raftstore.Key, data []byte) (raftstore.Object, error) {
	if !isDryRun(ctx) {
		return s.Store.Create(ctx, key, data)
	}
	if _, err := s.Store.Get(ctx, key); err == nil {
		return raftstore.Object{}, fmt.Errorf("dry run: %w", raftstore.ErrExists)
	} else if !errors.Is(err, raftstore.ErrNotFound) {
		return raftstore.Object{}, err
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return raftstore.Object{}, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	meta["uid"] = string(uuid.NewUUID())
	meta["creationTimestamp"] = s.clock.Now().UTC().Format(time.RFC3339)
	stamped, err := json.Marshal(obj)
	if err != nil {
		return raftstore.Object{}, err
	}
	return raftstore.Object{Key: key, Data: stamped}, nil
}

// Update implements Store: a dry update checks the object exists and the
// preconditions hold, and returns the object unstored at its current
// resourceVersion.
func (s dryRunStore) Update(ctx context.Context, key raftstore.Key, data []byte, pre raftstore.Preconditions) (raftstore.Object, error) {
	if !isDryRun(ctx) {
		return s.Store.Update(ctx, key, data, pre)
	}
	cur, err := s.checked(ctx, key, pre)
	if err != nil {
		return raftstore.Object{}, err
	}
	return raftstore.Object{Key: key, Data: data, RV: cur.RV}, nil
}

// Delete implements Store: a dry delete checks as Update does and returns
// the object as stored.
func (s dryRunStore) Delete(ctx context.Context, key raftstore.Key, pre raftstore.Preconditions) (raftstore.Object, error) {
	if !isDryRun(ctx) {
		return s.Store.Delete(ctx, key, pre)
	}
	return s.checked(ctx, key, pre)
}

// checked reads key and checks pre against it, as the store's write would.
func (s dryRunStore) checked(ctx context.Context, key raftstore.Key, pre raftstore.Preconditions) (raftstore.Object, error) {
	cur, err := s.Store.Get(ctx, key)
	if err != nil {
		return raftstore.Object{}, err
	}
	if pre.ResourceVersion != 0 && pre.ResourceVersion != cur.RV {
		return raftstore.Object{}, fmt.Errorf("dry run: resourceVersion %d, stored %d: %w", pre.ResourceVersion, cur.RV, raftstore.ErrConflict)
	}
	if pre.UID != "" {
		var m struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(cur.Data, &m); err != nil {
			return raftstore.Object{}, err
		}
		if m.Metadata.UID != pre.UID {
			return raftstore.Object{}, fmt.Errorf("dry run: uid %s, stored %s: %w", pre.UID, m.Metadata.UID, raftstore.ErrConflict)
		}
	}
	return cur, nil
}
