// Package portal tests the web portal in a real headless Chromium against a
// running serve (docs/self-service.md): a tenant signs in with its token,
// sees its usage and asks for more; staff approve part of it; the tenant's
// page shows the new limit without a reload. And the staff view's load time
// with 1,000 organizations and 10,000 buckets.
package portal

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

var (
	srv               *testserver.Server
	updateScreenshots = flag.Bool("update-screenshots", false, "write the screenshots to docs/images (to commit them)")
)

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}

// chromium is Debian's package (or another Chromium or Chrome on PATH).
func chromium(t *testing.T) string {
	t.Helper()
	return tools.Require(t, tools.Chromium)
}

// browser starts a headless Chromium for the test; each tab made from it
// has its own session storage (so its own signed-in user).
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox,
		chromedp.Flag("ignore-certificate-errors", true), chromedp.WindowSize(1280, 800))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// tab opens a new tab of the browser, at 1280x800.
func tab(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func portalURL(hash string) string { return srv.Config.Host + "/portal/" + hash }

// run runs actions with a deadline, failing the test with what the page
// shows when they fail.
func run(t *testing.T, ctx context.Context, what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		body := pageText(ctx)
		if len(body) > 3000 {
			body = body[:3000]
		}
		t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, body)
	}
}

// signIn opens the portal at hash and signs in with token.
func signIn(t *testing.T, ctx context.Context, token, hash string) {
	t.Helper()
	run(t, ctx, "signing in", 30*time.Second,
		chromedp.Navigate(portalURL(hash)),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitNotPresent(chromedp.CSS("#signin")),
	)
}

// text waits until the first element sel matches holds want.
func waitText(t *testing.T, ctx context.Context, sel, want string, timeout time.Duration) {
	t.Helper()
	waitTextThat(t, ctx, sel, fmt.Sprintf("%q", want), func(s string) bool { return s == want }, timeout)
}

// waitTextContaining waits until the first element sel matches holds every
// one of parts.
func waitTextContaining(t *testing.T, ctx context.Context, sel string, timeout time.Duration, parts ...string) {
	t.Helper()
	waitTextThat(t, ctx, sel, fmt.Sprintf("text containing %q", parts), func(s string) bool {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				return false
			}
		}
		return true
	}, timeout)
}

func waitTextThat(t *testing.T, ctx context.Context, sel, want string, ok func(string) bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got string
	for time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, time.Second)
		text, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		cancel()
		got = text
		if err == nil && ok(strings.TrimSpace(got)) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s shows %q, want %s (waited %s); the page:\n%.3000s", sel, got, want, timeout, pageText(ctx))
}

// screenshot saves the page as name.png: in docs/images with
// -update-screenshots, else in the test's temporary directory. Either way
// it must be a 1280x800 image.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Not in the middle of a transition (a usage bar growing to its width).
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		moving, err := chromedp.Run(c, chromedp.Evaluate[bool](`document.getAnimations().some((a) => a instanceof CSSTransition && a.playState === 'running')`))
		if err != nil || !moving {
			break
		}
	}
	png, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("taking a screenshot: %v", err)
	}
	dir := t.TempDir()
	if *updateScreenshots {
		dir = filepath.Join(quotatest.ModuleRoot(), "docs", "images")
	}
	if w, h := pngSize(png); w != 1280 || h != 800 {
		t.Fatalf("screenshot %s is %dx%d, want 1280x800", name, w, h)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pageText is what the page shows, for failure messages.
func pageText(ctx context.Context) string {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body, _ := chromedp.Run(c, chromedp.Text(chromedp.CSS("body")))
	return body
}

// pngSize reads a PNG's width and height from its header.
func pngSize(b []byte) (int, int) {
	if len(b) < 24 || string(b[1:4]) != "PNG" {
		return 0, 0
	}
	be := func(p []byte) int { return int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3]) }
	return be(b[16:20]), be(b[20:24])
}

func bucketSel(kind, name, rt, field string) string {
	return fmt.Sprintf(`.bucket[data-consumer="%s/%s"][data-resource-type="%s"] .%s`, kind, name, rt, field)
}
