package mcp

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected names were computed with the reference's _registered_name
// (harnessx/mcp.py).
func TestRegisteredName(t *testing.T) {
	t.Parallel()
	x := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct{ server, tool, want string }{
		{"files", "read_file", "files_read_file"},
		{"files", "files_read", "files_read"},
		{"files", "filesystem_read", "filesystem_read"}, // a plain prefix counts, as in the reference
		{"my server", "get.weather", "my_server_get_weather"},
		{"__a__", "--b--", "a_b"},
		{"", "tool", "tool"},
		{"srv", "", "srv"},
		{"日本", "ツール", ""},
		{"a", "a-b", "a-b"},
		{"srv", "a__b___c", "srv_a_b_c"},
		{"srv", "-_-tool-_-", "srv_tool"},
		{"srv-", "x", "srv_x"},
		{"a b", "a_b_c", "a_b_c"},
		{"srv", "tool😀name", "srv_tool_name"},
		{"GitHub", "GitHub.search", "GitHub_search"},
		{"srv", "a-_-b", "srv_a-_-b"}, // only runs of _ collapse
		{"s-", "-t", "s_t"},
		{"srv", "bad\xffutf8", "srv_bad_utf8"},
		{"s", x(200), "s_" + x(126)},
		{x(130), "y", x(128)},
		{"s", x(126) + "_-y", "s_" + x(126)},
		{"s", x(125) + "_y", "s_" + x(125) + "_"}, // the cut comes after the strip
		{"a", "b_" + strings.Repeat("c", 125) + "__d", "a_b_" + strings.Repeat("c", 124)},
	}
	for _, c := range cases {
		require.Equal(t, c.want, RegisteredName(c.server, c.tool), "RegisteredName(%q, %q)", c.server, c.tool)
	}
}

// registeredRE is what every registered name matches.
var registeredRE = regexp.MustCompile(`^([a-zA-Z0-9][a-zA-Z0-9_-]*)?$`)

// FuzzRegisteredName checks the invariants of a registered name: the
// allowed characters only, no run of "_", no leading "_" or "-", at most
// 128 characters, and the sanitized server name as prefix.
func FuzzRegisteredName(f *testing.F) {
	f.Add("files", "read_file")
	f.Add("my server", "get.weather")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, server, tool string) {
		got := RegisteredName(server, tool)
		if len(got) > 128 {
			t.Fatalf("%q is longer than 128", got)
		}
		if !registeredRE.MatchString(got) {
			t.Fatalf("%q has a forbidden character or a leading _ or -", got)
		}
		if strings.Contains(got, "__") {
			t.Fatalf("%q holds a run of _", got)
		}
		if s := sanitize(server); !strings.HasPrefix(got, s) && len(s) < 128 {
			t.Fatalf("%q does not start with %q", got, s)
		}
		if got != RegisteredName(server, tool) {
			t.Fatal("not deterministic")
		}
	})
}
