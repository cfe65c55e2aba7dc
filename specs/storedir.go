package specs

import (
	"fmt"
	"os"
	"path/filepath"
)

// MaxNameLength bounds a scenario name, which is one directory of every run's
// path in the store.
const MaxNameLength = 100

// latestLink is the store's link to the newest run; no scenario may have its
// name.
const latestLink = "latest"

// ValidName reports why name cannot name a scenario, or nil. A name is one
// directory in the store, so it is 1 to MaxNameLength characters of
// [A-Za-z0-9._+-] starting with a letter or a digit: no path separator, no
// "." or "..", no hidden directory, nothing a shell or a URL must quote. The
// '+' is there because the default names join faults with it
// ("pets-partition-node+kill"). "latest" is the store's link to the newest
// run, and is refused.
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("scenario name is empty")
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("scenario name %.20q… is %d characters long; at most %d", name, len(name), MaxNameLength)
	}
	if name == latestLink {
		return fmt.Errorf("scenario name %q is the store's link to the newest run; choose another", name)
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("scenario name %q must start with a letter or a digit", name)
		}
		if !alnum && c != '.' && c != '_' && c != '+' && c != '-' {
			return fmt.Errorf("scenario name %q has %q: use letters, digits and . _ + - only (it names a directory of the store)", name, c)
		}
	}
	return nil
}

// createRunDir creates store/name/leaf, the directory of one run, and points
// store/latest at it. Every step goes through an os.Root opened on the store,
// so that no name and no link already in the store (a run's directory
// replaced by a link to elsewhere) can make the run write outside it;
// ValidName refuses such names earlier, with a clearer message.
func createRunDir(store, name, leaf string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", fmt.Errorf("creating run directory: %w", err)
	}
	if err := os.MkdirAll(store, 0o755); err != nil {
		return "", fmt.Errorf("creating run directory: %w", err)
	}
	root, err := os.OpenRoot(store)
	if err != nil {
		return "", fmt.Errorf("creating run directory: %w", err)
	}
	defer root.Close()
	rel := filepath.Join(name, leaf)
	if err := root.MkdirAll(rel, 0o755); err != nil {
		return "", fmt.Errorf("creating run directory: %w", err)
	}
	// Best effort: a missing link loses nothing.
	root.Remove(latestLink)
	root.Symlink(rel, latestLink)
	return filepath.Join(store, rel), nil
}
