package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestURLPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, conn, want string
	}{
		{"url", "postgres://u:pw@h:5432/db", "pw"},
		{"url escaped", "postgresql://u:p%40ss%2Fw@h/db", "p@ss/w"},
		{"url no password", "postgres://u@h/db", ""},
		{"url query password", "postgres://u@h/db?sslmode=disable&password=pw", "pw"},
		{"url bad port", "postgres://u:pw@h:x/db", "pw"},
		{"url at in password", "postgres://u:p@w@h/db", "p@w"},
		{"kv", "host=h password=pw user=u", "pw"},
		{"kv quoted", "host=h password = 'p w\\'x' user=u", "p w'x"},
		{"kv last", "host=h user=u password=pw", "pw"},
		{"kv passfile only", "host=h passfile=/x", ""},
		{"none", "host=h", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, urlPassword(tt.conn))
		})
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	err := scrub(errors.New("cannot parse postgres://u:p%40ss@h and p@ss"), "p@ss")
	require.NotContains(t, err.Error(), "p@ss")
	require.NotContains(t, err.Error(), "p%40ss")
	require.Nil(t, scrub(nil, "x"))
}

func TestEventChannel(t *testing.T) {
	t.Parallel()
	c := eventChannel(`harness "x"?%`)
	require.True(t, strings.HasPrefix(c, "hxd_events_"))
	require.Len(t, c, len("hxd_events_")+16)
	require.NotEqual(t, c, eventChannel("harness_x"))
}

func TestValidSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, err string // err: a part of the error; "" when valid
	}{
		{`harness "x"?% with spaces`, ""},
		{strings.Repeat("x", 63), ""},
		{"$users", ""},
		{"PG_upper", ""}, // the reservation is case-sensitive
		{"my_pg_schema", ""},
		{strings.Repeat("x", 64), "longer than 63 bytes"},
		{"", "empty schema name"},
		{"a\x00", "contains NUL"},
		{"a\xff", "not valid UTF-8"},
		{"$user", "named after the database role"},
		{"pg_temp", "reserved for PostgreSQL's system schemas"},
		{"pg_catalog", "reserved for PostgreSQL's system schemas"},
		{"pg_hxd", "reserved for PostgreSQL's system schemas"},
	} {
		err := validSchema(tc.name)
		if tc.err == "" {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorContains(t, err, tc.err, tc.name)
		}
	}
}
