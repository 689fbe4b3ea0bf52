// Package browsertest runs headless Chromium for the tests that drive a
// page in a real browser (chromedp): one browser per test binary, started
// at the first use and ended by Main, and a tab in a browser context of
// its own for each test (no cookies, cache or credentials shared). A test
// skips, saying why, only when no Chromium is installed (.ci/run installs
// Debian's chromium).
package browsertest

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TabTimeout bounds everything one tab does.
const TabTimeout = 3 * time.Minute

var shared struct {
	mu      sync.Mutex
	browser context.Context // the running browser; nil before the first Tab
	stop    func()
	err     error
}

// Path is the browser binary, or "" when none is installed.
func Path() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Tab returns a new tab's context in a fresh browser context of the shared
// browser, closed when the test ends; it skips the test without Chromium.
func Tab(t testing.TB) context.Context {
	t.Helper()
	b, err := browser()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if b == nil {
		t.Skip("no chromium: .ci/run installs Debian's chromium package")
	}
	tctx, cancelTab := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(tctx, TabTimeout)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelTab()
		t.Fatalf("chromium: open a tab: %v", err)
	}
	t.Cleanup(func() { cancel(); cancelTab() })
	return ctx
}

// browser starts the shared browser once; nil without Chromium.
func browser() (context.Context, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.browser != nil || shared.err != nil {
		return shared.browser, shared.err
	}
	path := Path()
	if path == "" {
		return nil, nil
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900))
	actx, stopAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, stopBrowser := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil {
		stopBrowser()
		stopAlloc()
		shared.err = err
		return nil, err
	}
	shared.browser = bctx
	shared.stop = func() { stopBrowser(); stopAlloc() }
	return bctx, nil
}

// Close ends the shared browser, if it was started.
func Close() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.stop != nil {
		shared.stop()
	}
	shared.browser, shared.stop = nil, nil
}

// M is a testing.M whose Run ends the shared browser after the tests, so a
// leak check that runs after it (goleak.VerifyTestMain) finds none of its
// goroutines.
type M struct{ *testing.M }

// Run runs the tests, then closes the browser.
func (m M) Run() int {
	defer Close()
	return m.M.Run()
}
