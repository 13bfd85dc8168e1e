package postgres

import (
	"context"
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
		{"kv escaped quote", `host=h password='a\' TopSecret' sslmode=bogus`, "a' TopSecret"},
		{"kv escaped space", `host=h port=abc password=x\ TopSecretTail dbname=test`, "x TopSecretTail"},
		{"kv escaped backslash", `host=h password='a\\' port=abc`, `a\`},
		{"kv unterminated", `host=h password='open TopSecret`, "open TopSecret"},
		{"kv sslpassword first", "sslpassword=ssl host=h password=pw", "pw"},
		{"kv in another value", "application_name='x password=y' password=pw", "pw"},
		{"kv last wins", "password=one password=two", "two"},
		{"none", "host=h", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, urlPassword(tt.conn))
		})
	}
}

// TestOpenErrorHidesPassword: no part of a password survives in the error
// of a connection string pgx cannot parse, however it is quoted, escaped or
// URL-encoded.
func TestOpenErrorHidesPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, conn string
		secrets    []string // none may appear in the error
	}{
		{"kv escaped quote", `host=127.0.0.1 password='a\' TopSecret' sslmode=bogus`, []string{"TopSecret"}},
		{"kv escaped space", `host=127.0.0.1 port=abc password=x\ TopSecretTail dbname=test`, []string{"TopSecretTail"}},
		{"kv quoted spaces", `host=127.0.0.1 password = 'Top Secret Words' port=abc`, []string{"Top", "Secret", "Words"}},
		{"kv escaped backslash", `host=127.0.0.1 password='Top\\ Secret' port=abc`, []string{"Top", "Secret"}},
		{"kv unterminated quote", `host=127.0.0.1 password='Top Secret`, []string{"Top", "Secret"}},
		{"kv unquoted escapes", `host=127.0.0.1 password=Top\'Se\\cret port=abc`, []string{"Top", "Se", "cret"}},
		{"kv sslpassword", `host=127.0.0.1 sslpassword='Top\' Secret' port=abc`, []string{"Top", "Secret"}},
		{"kv two passwords", `password=TopOne host=127.0.0.1 password='Top\' Two' port=abc`, []string{"TopOne", "Two"}},
		{"kv unquoted space", `host=127.0.0.1 password=TopSecret More Words port=abc`, []string{"TopSecret", "More", "Words"}},
		{"kv unquoted space at the end", `host=127.0.0.1 port=abc password=TopSecret TailWord`, []string{"TopSecret", "TailWord"}},
		{"kv empty password", `host=127.0.0.1 port=abc password=`, nil},
		{"url encoded", "postgres://u:Top%40Secret%20Words@127.0.0.1:abc/db", []string{"Top", "Secret", "Words"}},
		{"url raw", "postgres://u:Top@Secret@127.0.0.1:abc/db", []string{"Top", "Secret"}},
		{"url query", "postgres://u@127.0.0.1:abc/db?password=Top%20Secret", []string{"Top", "Secret"}},
		{"url slash", "postgres://u:Top/Sec@ret@127.0.0.1/db?sslmode=bogus", []string{"Top", "Sec", "ret"}},
		{"url bad escape", "postgres://u:Top%zzSecret@127.0.0.1/db", []string{"Top", "Secret"}},
		{"url at in query", "postgres://u:TopSecret@127.0.0.1:5432/db?application_name=a@b&sslpassword=Top%20Two&sslmode=bogus",
			[]string{"TopSecret", "Top", "Two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Open(context.Background(), Config{URL: tt.conn})
			require.Error(t, err)
			require.Contains(t, err.Error(), "parse database url")
			for _, s := range tt.secrets {
				require.NotContains(t, err.Error(), s)
			}
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
