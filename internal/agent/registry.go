package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrUnknownAgent is returned by Registry.Get for a ref nobody registered.
var ErrUnknownAgent = errors.New("unknown agent")

// ErrDuplicateAgent is returned by Registry.Register for a name@version
// that is already registered.
var ErrDuplicateAgent = errors.New("agent already registered")

// Registry maps AgentRefs to definitions. It is safe for concurrent use.
// Definitions it returns are shared and must not be modified.
type Registry struct {
	mu       sync.RWMutex
	defs     map[Ref]*Definition
	builtins []string
}

// NewRegistry returns an empty registry. extraBuiltins names builtin tools
// the process provides beyond the standard ones (tool.Options.Builtins).
func NewRegistry(extraBuiltins ...string) *Registry {
	return &Registry{defs: map[Ref]*Definition{}, builtins: extraBuiltins}
}

// Register validates d and adds it with defaults applied. A second
// definition for the same name@version is refused with ErrDuplicateAgent.
func (r *Registry) Register(d *Definition) error {
	if d == nil {
		return fmt.Errorf("%w: nil definition", ErrInvalidDefinition)
	}
	if err := d.Validate(r.builtins...); err != nil {
		return fmt.Errorf("agent %s: %w", d.Ref(), err)
	}
	d = d.WithDefaults()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.defs[d.Ref()]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateAgent, d.Ref())
	}
	r.defs[d.Ref()] = d
	return nil
}

// Get returns the definition registered for ref, or an error wrapping
// ErrUnknownAgent.
func (r *Registry) Get(ref Ref) (*Definition, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.defs[ref]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownAgent, ref)
	}
	return d, nil
}

// List returns every definition sorted by name, then version.
func (r *Registry) List() []*Definition {
	r.mu.RLock()
	defs := make([]*Definition, 0, len(r.defs))
	for _, d := range r.defs {
		defs = append(defs, d)
	}
	r.mu.RUnlock()
	slices.SortFunc(defs, func(a, b *Definition) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
	})
	return defs
}
