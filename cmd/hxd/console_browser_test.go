package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// The console's browser tests: a real headless Chromium (hxtest.NewBrowser)
// against `hxd serve --demo` in-process (startDaemon), asserting on the
// DOM hooks (data-testid) of the console.

// askerAgent's one tool is a client tool: the run waits for its result,
// given with resolve {result}.
const askerAgent = `name: asker
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: q, name: lookup, input: {question: meaning}}]
    - text: The answer is in.
tools:
  - name: lookup
    kind: client
    input_schema: {type: object, properties: {question: {type: string}}}
`

// newConsole starts a browser and `hxd serve --demo` with the sleeper and
// asker agents; the context is the browser tab's.
func newConsole(t *testing.T) (context.Context, *daemon) {
	t.Helper()
	ctx := hxtest.NewBrowser(t)
	agents := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(agents, "sleeper.yaml"), []byte(sleeperAgent), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "asker.yaml"), []byte(askerAgent), 0o600))
	return ctx, serveInProcess(t, func(string) string { return "" }, []string{"serve", "--addr", "127.0.0.1:0",
		"--db", filepath.Join(t.TempDir(), "hxd.db"), "--demo", "--agents", agents, "--workdir", t.TempDir(),
		"--shutdown-timeout", "200ms"})
}

// open navigates the tab to the console path p (e.g. /ui/runs/<id>).
func open(t *testing.T, ctx context.Context, d *daemon, p string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(d.base+p)))
}

// waitFor polls the JavaScript predicate until it is truthy (20 s at most).
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[any](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, body)
	}
}

// eval evaluates expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))), sel)
}

// createSession creates a recorded session of agent (name@version).
func (d *daemon) createSession(t *testing.T, id, agent string) {
	t.Helper()
	name, version, _ := strings.Cut(agent, "@")
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"session_id": id, "agent": map[string]string{"name": name, "version": version}, "recording": true})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
}

// submit starts a run in session (waiting up to wait seconds, 0: not at
// all) and returns its result.
func (d *daemon) submit(t *testing.T, session string, wait int, body map[string]any) map[string]any {
	t.Helper()
	resp, raw := d.do(t, http.MethodPost, fmt.Sprintf("/sessions/%s/runs?wait=%d", session, wait), body)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, resp.StatusCode, string(raw))
	return decode(t, raw)
}

const (
	runStatusIs = `(document.querySelector('[data-testid=run-status]')||{}).textContent === %q`
	barSel      = `[data-testid=bar][data-lane=%q][data-attempt=%q]`
)

// TestConsoleInvoiceRun: the demo invoice run's page shows the failed
// first model attempt and its retry, the overdue_balance tool bar, and a
// bar's events on click and on Enter; the page fits a phone's width.
func TestConsoleInvoiceRun(t *testing.T) {
	t.Parallel()
	ctx, d := newConsole(t)
	d.createSession(t, "incident-42", "invoice-analyst@v1")
	run := d.submit(t, "incident-42", 30, map[string]any{"message": "What is the overdue balance of account demo?"})
	require.Equal(t, "completed", run["status"])
	runID := run["run_id"].(string)

	open(t, ctx, d, "/ui/runs/"+runID)
	waitFor(t, ctx, "run status completed", fmt.Sprintf(runStatusIs, "completed"))
	waitFor(t, ctx, "the timeline's bars", `document.querySelectorAll('[data-testid=bar]').length >= 3`)
	lanes := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid=lane]')].map(e => e.dataset.lane)`)
	require.Equal(t, []string{"model", "tool:overdue_balance"}, lanes)

	type bar struct{ Lane, Attempt, Outcome, Step string }
	bars := eval[[]bar](t, ctx, `[...document.querySelectorAll('[data-testid=bar]')].map(e => ({Lane: e.dataset.lane, Attempt: e.dataset.attempt, Outcome: e.dataset.outcome, Step: e.dataset.step}))`)
	require.Contains(t, bars, bar{Lane: "model", Attempt: "1", Outcome: "retrying", Step: "1"}, "the injected connection failure, retried")
	require.Contains(t, bars, bar{Lane: "model", Attempt: "2", Outcome: "succeeded", Step: "1"}, "its retry")
	require.Contains(t, bars, bar{Lane: "tool:overdue_balance", Attempt: "1", Outcome: "succeeded", Step: "1"})
	label := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).getAttribute('aria-label')`, fmt.Sprintf(barSel, "model", "1")))
	require.Contains(t, label, "attempt 1")
	require.Contains(t, label, "failed")

	// Click: the retry's events (its text and tool call). The scripted run
	// takes milliseconds, so bars drawn at their minimum width may overlap
	// (the next step's bar over this one): click the element itself.
	eval[bool](t, ctx, fmt.Sprintf(`(document.querySelector(%q).click(), true)`, fmt.Sprintf(barSel, "model", "2")))
	waitFor(t, ctx, "the retry's detail", `(document.querySelector('[data-testid=bar-detail] h2')||{}).textContent === 'Model · step 1 · attempt 2'`)
	waitFor(t, ctx, "the retry's events", `document.querySelectorAll('[data-testid=bar-detail] [data-testid=event]').length > 0`)
	types := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid=bar-detail] [data-testid=event]')].map(e => e.dataset.type)`)
	require.Contains(t, types, "tool_call_complete")
	hxtest.SaveScreenshot(t, ctx, "console-run")

	// Dark: the colours follow prefers-color-scheme.
	require.Equal(t, "rgb(247, 247, 248)", eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`))
	setDark := func(dark string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			_, err := cdp.Call(ctx, tgt, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: dark}}})
			return err
		}))
		require.NoError(t, err)
	}
	setDark("dark")
	waitFor(t, ctx, "the dark colours", `getComputedStyle(document.body).backgroundColor === 'rgb(21, 22, 26)'`)
	hxtest.SaveScreenshot(t, ctx, "console-run-dark")
	setDark("light")

	// Keyboard: focus the tool bar, Enter shows its events.
	require.NoError(t, chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(fmt.Sprintf(barSel, "tool:overdue_balance", "1"))), chromedp.KeyEvent("\r")))
	waitFor(t, ctx, "the tool's events", `[...document.querySelectorAll('[data-testid=bar-detail] [data-testid=event]')].some(e => e.dataset.type === 'tool_result')`)
	require.True(t, eval[bool](t, ctx, `document.activeElement.dataset.testid === 'bar'`))

	// Export: refused (artifacts need payloads) shows the problem, then a
	// metadata-only bundle is saved.
	click(t, ctx, `[data-testid=export-artifacts]`)
	click(t, ctx, `[data-testid=export]`)
	waitFor(t, ctx, "the invalid_policy problem", `(document.querySelector('.export [data-testid=problem]')||{textContent: ''}).textContent.includes('invalid_policy')`)
	click(t, ctx, `[data-testid=export-artifacts]`)
	click(t, ctx, `[data-testid=export]`)
	waitFor(t, ctx, "the saved bundle", fmt.Sprintf(`(document.querySelector('[data-testid=export-done]')||{textContent: ''}).textContent.includes(%q)`, runID+".hx ("))
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('.export [data-testid=problem]').length`))

	// Phone: nothing but the timeline scrolls sideways.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)))
	waitFor(t, ctx, "the phone layout", `innerWidth === 390`)
	overflow := eval[int](t, ctx, `document.documentElement.scrollWidth - document.documentElement.clientWidth`)
	require.LessOrEqual(t, overflow, 0, "the page body overflows the phone's width")
	require.True(t, eval[bool](t, ctx, `(() => { const s = document.querySelector('.timeline-scroll'); return s.scrollWidth > s.clientWidth && s.getBoundingClientRect().right <= innerWidth; })()`),
		"the timeline scrolls inside its box")
	hxtest.SaveScreenshot(t, ctx, "console-run-phone")
}

// TestConsoleApproval: a run awaiting approval is approved from its page
// and completes.
func TestConsoleApproval(t *testing.T) {
	t.Parallel()
	ctx, d := newConsole(t)
	d.createSession(t, "remind", "invoice-reminder@v1")
	run := d.submit(t, "remind", 30, map[string]any{"message": "Remind the demo account."})
	require.Equal(t, "awaiting_input", run["status"])

	open(t, ctx, d, "/ui/runs/"+run["run_id"].(string))
	waitFor(t, ctx, "the pending call", `document.querySelector('[data-testid=pending-call] [data-testid=approve]')`)
	waitFor(t, ctx, "the awaiting bar", `document.querySelector('[data-testid=bar][data-lane="tool:send_reminder"][data-outcome=awaiting_approval]')`)
	hxtest.SaveScreenshot(t, ctx, "console-approval")
	click(t, ctx, `[data-testid=pending-call] [data-testid=approve]`)
	waitFor(t, ctx, "run status completed", fmt.Sprintf(runStatusIs, "completed"))
	waitFor(t, ctx, "the tool bar succeeded", `document.querySelector('[data-testid=bar][data-lane="tool:send_reminder"][data-outcome=succeeded]')`)
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('[data-testid=pending-call]').length`))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid=run-output]').textContent`), "$1,500 overdue balance")
}

// TestConsoleLiveDeltas: while a streamed run runs, its text deltas
// appear on the open run page over one event stream.
func TestConsoleLiveDeltas(t *testing.T) {
	t.Parallel()
	ctx, d := newConsole(t)
	d.createSession(t, "live", "sleeper@v1")
	run := d.submit(t, "live", 0, map[string]any{"message": "Take a nap.", "stream": true})
	runID := run["run_id"].(string)

	open(t, ctx, d, "/ui/runs/"+runID)
	waitFor(t, ctx, "the running run", fmt.Sprintf(runStatusIs, "running")+` && document.querySelector('[data-testid=live-text]')`)
	waitFor(t, ctx, "the streamed text", `document.querySelector('[data-testid=live-text]').textContent === 'rested'`)
	waitFor(t, ctx, "run status completed", fmt.Sprintf(runStatusIs, "completed"))
	streams := eval[int](t, ctx, fmt.Sprintf(`performance.getEntriesByType('resource').filter(e => e.name.endsWith('/runs/%s/events')).length`, runID))
	require.Equal(t, 1, streams, "one event stream for the open run page")
}

// TestConsoleSessions: the sessions page lists the caller's sessions,
// filters them by status and agent on the server, and pages.
func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	ctx, d := newConsole(t)
	for _, id := range []string{"inv-a", "inv-b"} {
		d.createSession(t, id, "invoice-analyst@v1")
		require.Equal(t, "completed", d.submit(t, id, 30, map[string]any{"message": "Balance?"})["status"])
	}
	d.createSession(t, "remind-1", "invoice-reminder@v1")
	for i := range 21 {
		d.createSession(t, fmt.Sprintf("idle-%02d", i), "crash-recovery@v1")
	}
	rows := func() []string {
		return eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid=session-row]')].map(e => e.dataset.sessionId).sort()`)
	}
	selectValue := func(testid, v string) {
		t.Helper()
		eval[bool](t, ctx, fmt.Sprintf(`(() => { const s = document.querySelector('[data-testid=%s]'); s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, testid, v))
	}

	open(t, ctx, d, "/ui/")
	waitFor(t, ctx, "a full first page", `document.querySelectorAll('[data-testid=session-row]').length === 20`)
	waitFor(t, ctx, "next page enabled", `!document.querySelector('[data-testid=next-page]').disabled`)
	hxtest.SaveScreenshot(t, ctx, "console-sessions")
	first := rows()
	click(t, ctx, `[data-testid=next-page]`)
	waitFor(t, ctx, "the second page", `document.querySelectorAll('[data-testid=session-row]').length === 4`)
	second := rows()
	require.Len(t, append(first, second...), 24)
	for _, id := range second {
		require.NotContains(t, first, id)
	}

	selectValue("filter-status", "completed")
	waitFor(t, ctx, "the completed sessions", `document.querySelectorAll('[data-testid=session-row]').length === 2`)
	require.Equal(t, []string{"inv-a", "inv-b"}, rows())
	require.Contains(t, eval[string](t, ctx, `location.search`), "status=completed")

	selectValue("filter-status", "")
	selectValue("filter-agent", "invoice-reminder@v1")
	waitFor(t, ctx, "the reminder's session", `document.querySelectorAll('[data-testid=session-row]').length === 1`)
	require.Equal(t, []string{"remind-1"}, rows())

	// A refused action shows the API's problem.
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=new-session-id]`), "remind-1")))
	click(t, ctx, `[data-testid=new-session-submit]`)
	waitFor(t, ctx, "the session_exists problem", `(document.querySelector('[data-testid=new-session] [data-testid=problem]')||{textContent: ''}).textContent.includes('session_exists')`)

	// A deep link keeps its filters on reload.
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload()))
	waitFor(t, ctx, "the filtered listing after reload", `document.querySelectorAll('[data-testid=session-row]').length === 1 && document.querySelector('[data-testid=filter-agent]').value === 'invoice-reminder@v1'`)

	// New session, then a run in it: the page moves to the run.
	selectValue("new-session-agent", "invoice-analyst@v1")
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=new-session-id]`), "from-console")))
	click(t, ctx, `[data-testid=new-session-submit]`)
	waitFor(t, ctx, "the start-run form", `document.querySelector('[data-testid=start-run] [data-testid=run-message]')`)
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=run-message]`), "What is overdue?")))
	click(t, ctx, `[data-testid=start-run-submit]`)
	waitFor(t, ctx, "the new run's page", `location.pathname.startsWith('/ui/runs/') && `+fmt.Sprintf(runStatusIs, "completed"))
	resp, body := d.do(t, http.MethodGet, "/sessions/from-console", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := decode(t, body)
	require.Equal(t, map[string]any{"name": "invoice-analyst", "version": "v1"}, s["agent"])
	require.Equal(t, "/ui/runs/"+s["latest_run"].(map[string]any)["run_id"].(string), eval[string](t, ctx, `location.pathname`))
}

// TestConsolePauseResume: a running run is paused and resumed from its
// page, which shows the pause and resume marks, then cancelled from its
// session's page on its second run.
func TestConsolePauseResume(t *testing.T) {
	t.Parallel()
	ctx, d := newConsole(t)
	d.createSession(t, "nap", "sleeper@v1")
	run := d.submit(t, "nap", 0, map[string]any{"message": "Take a nap."})
	runID := run["run_id"].(string)

	open(t, ctx, d, "/ui/runs/"+runID)
	waitFor(t, ctx, "the running run", fmt.Sprintf(runStatusIs, "running")+` && !document.querySelector('[data-testid=pause]').disabled`)
	click(t, ctx, `[data-testid=pause]`)
	waitFor(t, ctx, "run status paused", fmt.Sprintf(runStatusIs, "paused"))
	waitFor(t, ctx, "the paused mark", `document.querySelector('[data-testid=mark][data-type=paused]')`)
	click(t, ctx, `[data-testid=resume]`)
	waitFor(t, ctx, "run status completed", fmt.Sprintf(runStatusIs, "completed"))
	waitFor(t, ctx, "the resumed mark", `document.querySelector('[data-testid=mark][data-type=resumed]')`)

	second := d.submit(t, "nap", 0, map[string]any{"message": "Another nap."})
	open(t, ctx, d, "/ui/sessions/nap")
	waitFor(t, ctx, "both runs", `document.querySelectorAll('[data-testid=run-row]').length === 2`)
	waitFor(t, ctx, "cancel enabled", `!document.querySelector('[data-testid=cancel]').disabled`)
	click(t, ctx, `[data-testid=cancel]`)
	waitFor(t, ctx, "the cancelled run listed", fmt.Sprintf(`[...document.querySelectorAll('[data-testid=run-row]')].some(r => r.dataset.runId === %q && r.textContent.includes('cancelled'))`, second["run_id"]))
	resp, body := d.do(t, http.MethodGet, "/runs/"+second["run_id"].(string), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "cancelled", decode(t, body)["status"])
}

// TestConsoleResolve: a call awaiting its result (a client tool) is
// resolved with a result typed on the run page, and the run completes.
func TestConsoleResolve(t *testing.T) {
	t.Parallel()
	ctx, d := newConsole(t)
	d.createSession(t, "ask", "asker@v1")
	run := d.submit(t, "ask", 30, map[string]any{"message": "What is the meaning?"})
	require.Equal(t, "awaiting_input", run["status"])

	open(t, ctx, d, "/ui/runs/"+run["run_id"].(string))
	waitFor(t, ctx, "the pending call", `document.querySelector('[data-testid=pending-call] [data-testid=resolve-result]')`)
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=pending-call] textarea`), "42")))
	click(t, ctx, `[data-testid=pending-call] [data-testid=resolve-result]`)
	waitFor(t, ctx, "run status completed", fmt.Sprintf(runStatusIs, "completed"))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid=run-output]').textContent`), "The answer is in.")
	click(t, ctx, `[data-testid=bar][data-lane="tool:lookup"]`)
	waitFor(t, ctx, "the given result", `[...document.querySelectorAll('[data-testid=bar-detail] [data-testid=event][data-type=tool_result]')].some(e => e.textContent.includes('42'))`)
}

// TestConsoleBarDetailReadsNewEvents: a bar's detail left open while the
// run goes on shows the events that follow, and each refresh reads only
// the events after those it already has (never the whole log again).
func TestConsoleBarDetailReadsNewEvents(t *testing.T) {
	t.Parallel()
	ctx, d := newConsole(t)
	d.createSession(t, "ask", "asker@v1")
	run := d.submit(t, "ask", 30, map[string]any{"message": "What is the meaning?"})
	require.Equal(t, "awaiting_input", run["status"])

	open(t, ctx, d, "/ui/runs/"+run["run_id"].(string))
	waitFor(t, ctx, "the pending call", `document.querySelector('[data-testid=pending-call] [data-testid=resolve-result]')`)
	click(t, ctx, `[data-testid=bar][data-lane=model]`)
	waitFor(t, ctx, "the model attempt's events", `document.querySelectorAll('[data-testid=bar-detail] [data-testid=event]').length > 0`)
	// Record the event pages read from now on.
	require.True(t, eval[bool](t, ctx, `window.__eventReads = [];
		const f = window.fetch;
		window.fetch = (u, init) => {
			const s = String(u);
			if (s.includes('/events?')) window.__eventReads.push(new URL(s, location.href).searchParams.get('after'));
			return f(u, init);
		};
		true`))
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=pending-call] textarea`), "42")))
	click(t, ctx, `[data-testid=pending-call] [data-testid=resolve-result]`)
	waitFor(t, ctx, "run status completed", fmt.Sprintf(runStatusIs, "completed"))
	waitFor(t, ctx, "the given result", `[...document.querySelectorAll('[data-testid=bar-detail] [data-testid=event][data-type=tool_result]')].some(e => e.textContent.includes('42'))`)
	reads := eval[[]string](t, ctx, `window.__eventReads`)
	require.NotEmpty(t, reads, "the open detail read the new events")
	require.NotContains(t, reads, "0", "a refresh reads only the events after those already read")
}
