package raftstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/podsafe/podsafe/internal/atomicfile"
	"github.com/podsafe/podsafe/internal/dirlock"
)

// MembersFile records, in a durable member's data directory, the membership
// it was bootstrapped with. Raft keeps that membership in its log too, but
// a member restarted with another list would bootstrap its new peers into a
// second cluster (5 members on a 3-member directory: two leaders, requests
// failing at random) or wait forever for peers that are gone (1 on 3); the
// record lets Open refuse at once.
const MembersFile = "members.json"

// ErrDataDirInUse: another Store (in this process or another) has the data
// directory open; the error is a *dirlock.InUseError naming its pid.
var ErrDataDirInUse = dirlock.ErrInUse

// MembershipError reports a durable data directory bootstrapped with other
// members than the configured ones.
type MembershipError struct {
	Dir string
	// Recorded are the member IDs the directory was bootstrapped with;
	// Configured those Open was given.
	Recorded, Configured []string
}

// Error names both memberships.
func (e *MembershipError) Error() string {
	return fmt.Sprintf("data directory %s belongs to a %d-member cluster (%s), not the %d-member one configured (%s): start it with its own members, or use a new data directory",
		e.Dir, len(e.Recorded), strings.Join(e.Recorded, ", "), len(e.Configured), strings.Join(e.Configured, ", "))
}

type membersRecord struct {
	Members []Member `json:"members"`
}

func memberIDs(ms []Member) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	slices.Sort(ids)
	return ids
}

// recordMembers writes dir's membership record, before the bootstrap that
// makes it true: a crash between the two leaves a record and no raft state,
// which the next bootstrap writes again.
func recordMembers(dir string, members []Member) error {
	b, err := json.MarshalIndent(membersRecord{Members: members}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, MembersFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording membership: %w", err)
	}
	return nil
}

// checkMembers compares dir's membership record with members. A directory
// without a record (written before records were) passes.
func checkMembers(dir string, members []Member) error {
	b, err := os.ReadFile(filepath.Join(dir, MembersFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading membership record: %w", err)
	}
	var rec membersRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("membership record %s is corrupt: %w", filepath.Join(dir, MembersFile), err)
	}
	if recorded, configured := memberIDs(rec.Members), memberIDs(members); !slices.Equal(recorded, configured) {
		return &MembershipError{Dir: dir, Recorded: recorded, Configured: configured}
	}
	return nil
}
