package hxbundle

import "fmt"

// Limits bound a bundle at export and import (REFERENCE §7.2).
type Limits struct {
	// MaxBytes bounds the archive and the sum of its members. Default: 64 MiB.
	MaxBytes int64 `json:"max_bytes"`
	// MaxMemberBytes bounds one member. Default: 32 MiB.
	MaxMemberBytes int64 `json:"max_member_bytes"`
	// MaxRecords bounds the journal records. Default: 100,000.
	MaxRecords int `json:"max_records"`
	// MaxMembers bounds the archive entries. Default: 10,000.
	MaxMembers int `json:"max_members"`
}

// DefaultLimits are the reference's defaults.
var DefaultLimits = Limits{MaxBytes: 64 << 20, MaxMemberBytes: 32 << 20, MaxRecords: 100000, MaxMembers: 10000}

// ErrInvalidLimits: a limit that is not a positive integer. Its text is
// the reference's ValueError message (REFERENCE §7.2), which internal/http
// returns as a problem's detail.
var ErrInvalidLimits error = referenceMessage("Bundle limits must be positive integers")

// referenceMessage is an error whose text is a message worded as
// REFERENCE gives it (a capitalised sentence shown to users as is), not
// an error string meant to be wrapped into another. Errors of this type
// compare by their text, so errors.Is matches a wrapped sentinel.
type referenceMessage string

func (m referenceMessage) Error() string { return string(m) }

// Validate reports a limit that is not positive.
func (l Limits) Validate() error {
	if l.MaxBytes <= 0 || l.MaxMemberBytes <= 0 || l.MaxRecords <= 0 || l.MaxMembers <= 0 {
		return fmt.Errorf("%w: %+v", ErrInvalidLimits, l)
	}
	return nil
}
