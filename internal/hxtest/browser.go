package hxtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/chromedp/chromedp"
)

// Browser window size of NewBrowser (the console's desktop layout).
const (
	BrowserWidth  = 1280
	BrowserHeight = 800
)

// chromiumPath is the browser NewBrowser drives: $HXD_TEST_CHROMIUM, else
// chromium (or chromium-browser) on PATH; "" when none is found.
func chromiumPath() string {
	if p := os.Getenv("HXD_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// NewBrowser starts a headless Chromium (Debian's chromium package, or
// $HXD_TEST_CHROMIUM) with a 1280×800 viewport and returns a chromedp
// context of its first tab; the browser is closed when the test ends. A
// missing browser skips the test with how to install it (fails under
// CI=true). At most two browsers run at once in a test process (a
// parallel test waits for its turn here). The sandbox is off when running
// as root, where Chromium refuses it.
func NewBrowser(t testing.TB) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		DependencyMissing(t, "no chromium on PATH: install Debian's chromium (apt-get install -y chromium) or set HXD_TEST_CHROMIUM")
	}
	browserSlots <- struct{}{}
	t.Cleanup(func() { <-browserSlots })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.WindowSize(BrowserWidth, BrowserHeight),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	// Start the browser now, so that a broken install fails here; the
	// viewport (not the window, which includes the browser's own bars) is
	// 1280×800.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(BrowserWidth, BrowserHeight)); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// browserSlots bounds the browsers running at once in one test process:
// parallel tests wait for a slot, so that a busy machine does not run
// one Chromium per test and time them out.
var browserSlots = make(chan struct{}, 2)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// SaveScreenshot writes a PNG of the viewport of ctx's tab (1280×800
// unless the test emulates another) as
// <name>.png under $HXD_TEST_ARTIFACTS (default: bin/test-artifacts/ of
// the repository) and logs its path.
func SaveScreenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("HXD_TEST_ARTIFACTS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		dir = filepath.Join(root, "bin", "test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	file := filepath.Join(dir, unsafeName.ReplaceAllString(name, "_")+".png")
	if err := os.WriteFile(file, png, 0o600); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	t.Logf("screenshot: %s", file)
}
