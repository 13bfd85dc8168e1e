package runtime_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	hxruntime "hxd/internal/runtime"
)

func TestSessionKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		principal, id string
	}{
		{"local", "incident-42"},
		{"https://issuer.example|alice", "incident-42"},
		{"https://issuer.example|bob", "incident-42"},
		{"", "0194a3b0-7c1d-7e4f-8a2b-3c4d5e6f7a8b"},
		{"alice", "a:b@c~d+e=f.g_h-i"},
		{"alice", "a/b"}, // no caller can create it, but a path may name it
	}
	keys := map[string]bool{}
	for _, tt := range tests {
		key := hxruntime.SessionKey(tt.principal, tt.id)
		require.Equal(t, tt.id, hxruntime.SessionIDOf(key), "the id round-trips")
		require.Equal(t, key, hxruntime.SessionKey(tt.principal, tt.id), "deterministic")
		require.Regexp(t, `^[0-9a-f]{32}/`, key)
		require.False(t, keys[key], "keys of different principals or ids differ: %s", key)
		keys[key] = true
	}
	require.NotEqual(t, hxruntime.SessionKey("alice", "x"), hxruntime.SessionKey("bob", "x"))
	// A principal's key never equals another principal's key for any id.
	alice, bob := hxruntime.SessionKey("alice", ""), hxruntime.SessionKey("bob", "")
	require.False(t, strings.HasPrefix(hxruntime.SessionKey("bob", "x"), alice))
	require.False(t, strings.HasPrefix(hxruntime.SessionKey("alice", "x"), bob))
	require.Equal(t, "plain", hxruntime.SessionIDOf("plain"))
}
