package model

import (
	"errors"
	"fmt"
)

// MaxFallbacks bounds the fallback list of a model section.
const MaxFallbacks = 8

// FallbackError is a problem with entry Index (0-based) of a model
// section's fallback list. It wraps the entry's own problem, which wraps
// ErrInvalidConfig.
type FallbackError struct {
	Index int
	Err   error
}

// Error implements error.
func (e *FallbackError) Error() string { return fmt.Sprintf("fallback[%d]: %v", e.Index, e.Err) }

// Unwrap returns the entry's problem.
func (e *FallbackError) Unwrap() error { return e.Err }

// fallbackErrors validates the fallback entries of c, each as a model
// section of its own; an entry with a fallback list of its own is refused.
func (c Config) fallbackErrors() []error {
	var errs []error
	if len(c.Fallback) > MaxFallbacks {
		errs = append(errs, fmt.Errorf("%w: fallback lists %d models, at most %d are allowed", ErrInvalidConfig, len(c.Fallback), MaxFallbacks))
	}
	for i, f := range c.Fallback {
		if len(f.Fallback) > 0 {
			errs = append(errs, &FallbackError{Index: i, Err: fmt.Errorf("%w: a fallback entry cannot have a fallback list of its own", ErrInvalidConfig)})
		}
		f.Fallback = nil
		err := f.Validate()
		if err == nil {
			continue
		}
		parts := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // the join itself, not its chain
			parts = j.Unwrap()
		}
		for _, e := range parts {
			errs = append(errs, &FallbackError{Index: i, Err: e})
		}
	}
	return errs
}

// Chain returns the models of c in the order they are tried: c itself
// (without its fallback list), then each fallback entry. An agent without
// a fallback list has a chain of one.
func (c Config) Chain() []Config {
	out := make([]Config, 0, 1+len(c.Fallback))
	primary := c
	primary.Fallback = nil
	out = append(out, primary)
	return append(out, c.Fallback...)
}

// ErrNoSuchModel is returned by ChainAt for a position outside the chain.
var ErrNoSuchModel = errors.New("no model at this chain position")

// ChainAt returns the model at position i of c's chain (0: c itself).
func (c Config) ChainAt(i int) (Config, error) {
	switch {
	case i == 0:
		primary := c
		primary.Fallback = nil
		return primary, nil
	case i > 0 && i <= len(c.Fallback):
		return c.Fallback[i-1], nil
	}
	return Config{}, fmt.Errorf("%w: %d of %d", ErrNoSuchModel, i, 1+len(c.Fallback))
}
