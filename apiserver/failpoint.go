package apiserver

// storeID is the identity of the store member st is, when it names one
// (raftstore's Store does): an API server's failpoints are aimed at the
// member it fronts, as the embedded cluster runs each API server with its
// member, one component. Empty otherwise: then its failpoints fire only
// unaimed.
func storeID(st Store) string {
	if named, ok := st.(interface{ ID() string }); ok {
		return named.ID()
	}
	return ""
}
