package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"io"
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

// browse runs browser actions with a time limit; on failure it reports
// where the page is and what it says.
func browse(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("browser: %v\npage: %s", err, where)
	}
}

// writeBundle writes bundle bytes to a .hx file of the test.
func writeBundle(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// inspect opens /ui/bundles, gives the file at path to the bundle input
// and waits for the verdict; it returns the verdict's text.
func inspect(t *testing.T, ctx context.Context, base, path string) string {
	t.Helper()
	browse(t, ctx,
		chromedp.Navigate(base+"/ui/bundles"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="drop-zone"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`[data-testid="bundle-input"]`), []string{path}),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="verify-summary"]`)),
	)
	summary, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="verify-summary"]`)))
	require.NoError(t, err)
	return summary
}

// drop drops a file of bundle bytes on the inspector's drop zone (a
// DataTransfer holding a File, as a drag from the desktop gives) and waits
// for the verdict; it returns the verdict's text.
func drop(t *testing.T, ctx context.Context, name string, data []byte) string {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const bin = atob(`+strconv.Quote(base64.StdEncoding.EncodeToString(data))+`);
		const file = new File([Uint8Array.from(bin, (c) => c.charCodeAt(0))], `+strconv.Quote(name)+`);
		const dt = new DataTransfer();
		dt.items.add(file);
		const zone = document.querySelector('[data-testid="drop-zone"]');
		zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
		zone.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
		return true;
	})()`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`(document.querySelector('#report-title') || {textContent: ''}).textContent.includes(`+
		strconv.Quote(name)+`)`, chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "no verdict on %s", name)
	summary, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="verify-summary"]`)))
	require.NoError(t, err)
	return summary
}

// evalStrings evaluates a JavaScript expression giving strings.
func evalStrings(t *testing.T, ctx context.Context, expr string) []string {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
	require.NoError(t, err)
	return out
}

// bars lists the timeline bars as "lane/step/attempt/outcome", sorted.
func bars(t *testing.T, ctx context.Context) []string {
	t.Helper()
	out := evalStrings(t, ctx, `[...document.querySelectorAll('[data-testid="bar"]')]
		.map(e => [e.dataset.lane, e.dataset.step, e.dataset.attempt, e.dataset.outcome].join('/'))`)
	slices.Sort(out)
	return out
}

// TestConsoleBundleInspector: a bundle exported by hxd (the demo invoice
// run, recorded, with payloads) given to the inspector's file input shows
// "valid, complete" and the bars rebuilt from its records: the failed
// first model attempt (retried), its retry, the tool and the answer;
// clicking a bar shows its records. A bundle of a run whose tool result
// spilled into an artifact lists that artifact with its hash and size.
func TestConsoleBundleInspector(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--agents", authAgents(t))
	_, rid := recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")
	resp, full := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(full))
	ctx := hxtest.NewBrowser(t)

	summary := inspect(t, ctx, d.base, writeBundle(t, rid+".hx", full))
	require.Contains(t, summary, "valid, complete")
	require.NotContains(t, summary, "invalid")
	require.Equal(t, []string{"valid"}, evalStrings(t, ctx,
		`[...document.querySelectorAll('[data-testid="verify-signature"]')].map(e => e.dataset.status)`), "signed by the server")
	require.Equal(t, []string{"model/1/1/retrying", "model/1/2/succeeded", "model/2/1/succeeded", "tool:overdue_balance/1/1/succeeded"},
		bars(t, ctx))
	require.Empty(t, evalStrings(t, ctx, `[...document.querySelectorAll('[data-testid="verify-issue"]')].map(e => e.textContent)`),
		"a complete bundle has no issue")

	// A bar's records: the failed attempt's.
	browse(t, ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="bar"][data-lane="model"][data-step="1"][data-attempt="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="bar-detail"] [data-kind="model.failed"]`)),
	)
	require.Equal(t, []string{"model.started", "model.failed", "event", "event"}, evalStrings(t, ctx,
		`[...document.querySelectorAll('[data-testid="bar-detail"] [data-testid="record"]')].map(e => e.dataset.kind)`))
	detail, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="bar-detail"]`)))
	require.NoError(t, err)
	require.Contains(t, detail, "Injected model connection failure")
	hxtest.SaveScreenshot(t, ctx, "console-bundle")

	// Keyboard: the drop zone is reachable with Tab and is a button.
	focused := evalStrings(t, ctx, `(() => { const z = document.querySelector('[data-testid="drop-zone"]');
		z.focus(); return [document.activeElement === z ? 'focused' : 'not focused', z.getAttribute('role')]; })()`)
	require.Equal(t, []string{"focused", "button"}, focused)

	// A phone: nothing wider than the screen but the timeline's own scroller.
	browse(t, ctx, chromedp.EmulateViewport(390, 844))
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	require.NoError(t, err)
	require.LessOrEqual(t, overflow, 0, "the inspector scrolls sideways on a phone")
	browse(t, ctx, chromedp.EmulateViewport(1280, 800))

	// The artifacts catalog.
	_, spillRid := recordedRun(t, d, "spiller", true, "go")
	resp, spilled := export(t, d, spillRid, map[string]any{"include_payloads": true, "include_artifacts": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(spilled))
	summary = drop(t, ctx, spillRid+".hx", spilled) // dropped on the page of the previous bundle
	require.Contains(t, summary, "valid, complete")
	rows := evalStrings(t, ctx, `[...document.querySelectorAll('[data-testid="artifact"]')].map(e => e.textContent)`)
	require.Len(t, rows, 1)
	require.Regexp(t, `^[0-9a-f]{64}`, rows[0])
	require.Contains(t, rows[0], "included")
	require.Contains(t, rows[0], "300 bytes") // the spilled echo of 30 × "0123456789"
}

// tamperRecords rewrites a bundle with one record's text changed (same
// length) and every ZIP checksum recomputed, so that only the manifest's
// digest of records.jsonl tells.
func tamperRecords(t *testing.T, bundle []byte, from, to string) []byte {
	t.Helper()
	require.Len(t, to, len(from))
	zr, err := zip.NewReader(bytes.NewReader(bundle), int64(len(bundle)))
	require.NoError(t, err)
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		if f.Name == "records.jsonl" {
			require.Contains(t, string(data), from)
			data = []byte(strings.Replace(string(data), from, to, 1))
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return out.Bytes()
}

// TestConsoleBundleTampered: a bundle whose records were changed after
// export (the records member no longer matches the manifest's digest)
// shows "invalid" and, first, the verifier's message exactly as POST
// /bundles/verify reports it, with where it was found; nothing is played
// back.
func TestConsoleBundleTampered(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))
	_, rid := recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")
	resp, full := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(full))
	tampered := tamperRecords(t, full, "Overdue balance: $1,500.", "Overdue balance: $9,500.")
	rep := verifyOverHTTP(t, d, tampered)
	require.False(t, rep.Valid)
	require.Equal(t, []string{"Member checksum mismatch"}, rep.Issues)
	ctx := hxtest.NewBrowser(t)

	summary := inspect(t, ctx, d.base, writeBundle(t, "tampered.hx", tampered))
	require.Contains(t, summary, "invalid, incomplete")
	issues := evalStrings(t, ctx, `[...document.querySelectorAll('[data-testid="verify-issue"] .issue-message')].map(e => e.textContent)`)
	require.Equal(t, rep.Issues, issues)
	first, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="verify-issue"]`)))
	require.NoError(t, err)
	require.Contains(t, first, "member records.jsonl")
	require.Empty(t, evalStrings(t, ctx, `[...document.querySelectorAll('[data-testid="timeline"]')].map(e => e.id)`),
		"an invalid bundle is not played back")

	// A metadata-only export is valid but incomplete: its completeness
	// issue, with the record it was found at, and still its timeline.
	resp, meta := export(t, d, rid, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(meta))
	rep = verifyOverHTTP(t, d, meta)
	require.Equal(t, []string{"payloads_omitted_or_redacted"}, rep.Issues)
	summary = inspect(t, ctx, d.base, writeBundle(t, "metadata.hx", meta))
	require.Contains(t, summary, "valid, incomplete")
	require.NotContains(t, summary, "invalid")
	first, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid="verify-issue"]`)))
	require.NoError(t, err)
	require.Contains(t, first, "payloads_omitted_or_redacted")
	require.Regexp(t, `record 1 \(id [0-9a-f-]{36}\)`, first)
	require.Contains(t, bars(t, ctx), "model/1/1/retrying")
}
