package main

import (
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// paste puts text into the token form as a paste does (one input event;
// typing a JWT key by key is slow on a loaded machine).
func paste(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => { const el = document.querySelector('[data-testid="token-input"]');
			el.value = `+strconv.Quote(text)+`; el.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)(ctx, tg)
		return err
	})
}

// sessionIDs lists the data-session-id of the sessions page's rows.
func sessionIDs(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return evalStrings(t, ctx, `[...document.querySelectorAll('[data-testid="session-row"]')].map(e => e.dataset.sessionId)`)
}

// waitText waits until the element of sel shows text containing want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		var err error
		got, err = chromedp.Run(ctx, chromedp.Evaluate[string](
			`(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ""`))
		require.NoError(t, err)
		if strings.Contains(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: want text %q, have %q", sel, want, got)
}

// TestConsoleOIDCHydra: with --auth=oidc against a real Ory Hydra, the
// console signs user A in with the Authorization Code flow with PKCE as a
// public client registered by the test (login and consent accepted by the
// test's rig, no password), shows A's name and A's sessions only (never
// B's, created over the API with B's token); signing out, or a token the
// API refuses (401), leads back to sign-in; a pasted token of A signs A in
// without the provider.
func TestConsoleOIDCHydra(t *testing.T) {
	t.Parallel()
	ci := os.Getenv("CI") == "true"
	if testing.Short() && !ci {
		t.Skip("-short: skipping the Ory Hydra end-to-end test")
	}
	bin := buildHydra(t, ci)
	rig := newLoginRig(t)
	port := freePort(t)
	origin := "http://127.0.0.1:" + strconv.Itoa(port)
	h := startHydra(t, bin, append(rig.env(),
		"SERVE_PUBLIC_CORS_ENABLED=true",
		"SERVE_PUBLIC_CORS_ALLOWED_ORIGINS="+origin,
	)...)
	rig.setAdmin(h.admin)
	redirect := origin + "/ui/callback"
	console := h.createPublicClient(t, redirect, "hxd")

	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--addr", "127.0.0.1:"+strconv.Itoa(port),
		"--auth", "oidc", "--oidc-issuer", h.issuer, "--oidc-audience", "hxd", "--oidc-console-client-id", console)
	require.Equal(t, origin, d.base)

	// B's session, over the API with B's (client-credentials) token.
	clientB := h.createClient(t, "")
	tokenB := h.token(t, clientB, "")
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": "invoice-analyst", "version": "v1"},
	}, bearerHdr(tokenB)...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sidB := decode(t, body)["session_id"].(string)

	// A signs in through the browser: discovery, redirect, login and
	// consent, callback, code exchange.
	ctx := hxtest.NewBrowser(t)
	rig.setSubject("alice")
	browse(t, ctx,
		chromedp.Navigate(origin+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sign-in"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="sign-in"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="signed-in-as"]`)),
	)
	require.Equal(t, []string{"alice"}, rig.acceptedLogins())
	waitText(t, ctx, `[data-testid="signed-in-as"]`, "alice")
	path, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname + location.search`))
	require.NoError(t, err)
	require.Equal(t, "/ui/", path, "the callback returns to the page sign-in started from, without the code")
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[int](`sessionStorage.length + localStorage.length`))
	require.NoError(t, err)
	require.Zero(t, stored, "nothing of the sign-in is left in web storage")

	// A creates a session from the console; A's page never shows B's.
	// (Navigation inside the console only: a reload would lose the token.)
	sidA := "alice-session"
	createSessionInConsole(t, ctx, sidA)
	browse(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/ui/bundles"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="drop-zone"]`)),
		chromedp.Click(chromedp.CSS(`nav a[href="/ui/"]`)))
	waitRows(t, ctx, 1)
	require.Equal(t, []string{sidA}, sessionIDs(t, ctx))
	require.NotContains(t, sessionIDs(t, ctx), sidB)

	// Signing out leads back to sign-in.
	browse(t, ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="sign-out"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="sign-in"]`)),
	)
	require.Empty(t, sessionIDs(t, ctx))

	// A token the API refuses (401) leads back to sign-in too.
	browse(t, ctx,
		paste(tokenB+"x"),
		chromedp.Click(chromedp.CSS(`[data-testid="token-submit"]`)),
	)
	waitText(t, ctx, `.sign-in .notice`, "refused")

	// An expired token is refused before any call (and cleared).
	expired := "e30." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","exp":1}`)) + ".c2ln"
	browse(t, ctx,
		paste(expired),
		chromedp.Click(chromedp.CSS(`[data-testid="token-submit"]`)),
	)
	waitText(t, ctx, `.sign-in [role="alert"]`, "This token has expired.")

	// The pasted-token fallback: A's token (from a code flow run without
	// the browser) shows A's sessions.
	tokenA := h.codeFlowToken(t, rig, console, redirect, "hxd", "alice")
	browse(t, ctx,
		paste(tokenA),
		chromedp.Click(chromedp.CSS(`[data-testid="token-submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="signed-in-as"]`)),
	)
	waitText(t, ctx, `[data-testid="signed-in-as"]`, "alice")
	waitRows(t, ctx, 1)
	require.Equal(t, []string{sidA}, sessionIDs(t, ctx))
	hxtest.SaveScreenshot(t, ctx, "console-signed-in")
}

// waitRows waits until the sessions page lists n rows.
func waitRows(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if len(sessionIDs(t, ctx)) == n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("want %d session rows, have %v", n, sessionIDs(t, ctx))
}

// createSessionInConsole creates a session named id with the sessions
// page's new-session form (the first agent offered) and waits for its row.
func createSessionInConsole(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	browse(t, ctx,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="new-session-submit"]:not([disabled])`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid="new-session-id"]`), id),
		chromedp.Click(chromedp.CSS(`[data-testid="new-session-submit"]`)),
	)
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Contains(sessionIDs(t, ctx), id) {
		if time.Now().After(deadline) {
			t.Fatalf("no row of the new session %q: %v", id, sessionIDs(t, ctx))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
