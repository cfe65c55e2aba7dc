module github.com/podsafe/podsafe/internal/fptoolexec

go 1.26.0

require github.com/pingcap/failpoint v0.0.0-20240528011301-b51a646c7c86

require github.com/sergi/go-diff v1.1.0 // indirect
