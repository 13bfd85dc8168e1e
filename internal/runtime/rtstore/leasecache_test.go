package rtstore

import (
	"context"
	"testing"
)

type fakeLease struct{ token string }

func (l fakeLease) SessionID() string                 { return "s" }
func (l fakeLease) Token() string                     { return l.token }
func (l fakeLease) Generation() int64                 { return 0 }
func (l fakeLease) Renew(ctx context.Context) error   { return nil }
func (l fakeLease) Release(ctx context.Context) error { return nil }

func TestLeaseCache(t *testing.T) {
	var c LeaseCache[int]
	a := &Commit{RunID: "r1", Lease: fakeLease{"a"}}
	a2 := &Commit{RunID: "r2", Lease: fakeLease{"a"}}
	b := &Commit{RunID: "r1", Lease: fakeLease{"b"}}
	none := &Commit{RunID: "r1"}

	if _, ok := c.Get(a); ok {
		t.Fatal("empty cache has an entry")
	}
	c.Put(a, 1)
	c.Put(a2, 2)
	if v, ok := c.Get(a); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	c.Put(none, 9) // an unfenced commit of r1: what a lease knew of r1 is stale
	if _, ok := c.Get(a); ok {
		t.Fatal("a commit without a lease left the run's entry")
	}
	if v, ok := c.Get(a2); !ok || v != 2 {
		t.Fatalf("Get(a2) = %d, %v: another run's entry went too", v, ok)
	}
	c.Put(a, 1)
	if _, ok := c.Get(b); ok {
		t.Fatal("another lease's token sees the entry")
	}
	if _, ok := c.Get(none); ok {
		t.Fatal("a commit without a lease sees the entry")
	}
	c.Update("a", func(runID string, v *int) { *v += 10 })
	if v, _ := c.Get(a2); v != 12 {
		t.Fatalf("after Update, Get(a2) = %d", v)
	}
	c.Forget("r1")
	if _, ok := c.Get(a); ok {
		t.Fatal("Forget kept the entry")
	}
	c.ForgetToken("a")
	if _, ok := c.Get(a2); ok {
		t.Fatal("ForgetToken kept the entry")
	}
	for i := range leaseCacheMax + 1 {
		c.Put(&Commit{RunID: string(rune('A'+i%26)) + string(rune(i)), Lease: fakeLease{"a"}}, i)
	}
	if n := len(c.runs); n > leaseCacheMax {
		t.Fatalf("cache holds %d entries, bound %d", n, leaseCacheMax)
	}
}
