package graphpass

// The package's sentinel errors. Errors wrap them with what was wrong and
// what is valid; compare with errors.Is.

import "errors"

// ErrMalformed is returned (wrapped) for input that is not a valid GraphDef.
var ErrMalformed = errors.New("graphpass: malformed graphdef")

// ErrLimit is returned (wrapped) when input exceeds a decoding limit.
var ErrLimit = errors.New("graphpass: decoding limit exceeded")

// ErrUnknownPass is returned (wrapped) by Manager.Enable for a name that no
// pass carries.
var ErrUnknownPass = errors.New("graphpass: unknown pass")

// ErrInvalidOption is returned (wrapped) by DecodeLimits and
// NewPinHostCompute for an option value out of range.
var ErrInvalidOption = errors.New("graphpass: invalid option")
