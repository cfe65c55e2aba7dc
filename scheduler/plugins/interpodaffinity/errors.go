package interpodaffinity

import "errors"

// ErrNoState means Filter or Score ran without their PreFilter or PreScore.
var ErrNoState = errors.New("no state from the pre-extension point")
