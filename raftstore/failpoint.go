package raftstore

import "github.com/podsafe/podsafe/internal/fpctx"

// nameFailpoints gives the member's failpoint markers (applyDelay,
// readSkipsApplyWait, ackBeforeSync) its raft ID as their identity, so that
// a failpoint aimed at one member (fpctx.Aim) fires in that member only.
// Open calls it before raft starts.
func (s *Store) nameFailpoints() {
	ctx := fpctx.For(s.cfg.ID)
	s.fsm.fp = ctx
	if s.disk != nil {
		s.disk.fp = ctx
	}
}
