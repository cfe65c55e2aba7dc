package controller

import "errors"

// ErrInvalidConfig reports a controller configuration that cannot work; the
// wrapped message names the field and the fix.
var ErrInvalidConfig = errors.New("invalid controller configuration")
