package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/internal/browsertest"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// page drives one tab of the owner's page through JavaScript, as a user's
// clicks and keys would: every wait is the page's own state, polled.
type page struct {
	t   *testing.T
	ctx context.Context
}

func openPage(t *testing.T, url string) page {
	t.Helper()
	p := page{t: t, ctx: browsertest.Tab(t)}
	p.visit(url)
	return p
}

func (p page) visit(url string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Navigate(url)); err != nil {
		p.t.Fatalf("open %s: %v", url, err)
	}
}

// eval runs js (a promise is awaited) and decodes its JSON value into T.
func eval[T any](p page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("page: %s: %v", js, err)
	}
	return v
}

// wait polls the page's predicate js until it holds (at most 30 s).
func (p page) wait(what, js string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		text := eval[string](p, `document.getElementById("view").innerText.slice(0, 2000)`)
		p.t.Fatalf("page: waiting for %s: %v\nthe page shows:\n%s", what, err, text)
	}
}

func (p page) click(sel string) {
	p.t.Helper()
	p.wait(sel+" enabled", fmt.Sprintf(`(e => e && !e.disabled)(document.querySelector(%q))`, sel))
	eval[bool](p, fmt.Sprintf(`(document.querySelector(%q).click(), true)`, sel))
}

func (p page) set(sel, value string) {
	p.t.Helper()
	p.wait(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	v, _ := json.Marshal(value)
	eval[bool](p, fmt.Sprintf(`(e => { e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true})); return true })(document.querySelector(%q))`, v, sel))
}

func (p page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`(e => e ? e.innerText : "")(document.querySelector(%q))`, sel))
}

// confirm answers the page's confirmation dialog.
func (p page) confirm() {
	p.t.Helper()
	p.wait("the confirmation dialog", `document.getElementById("confirm").open`)
	p.click("#confirm-ok")
	p.wait("the dialog to close", `!document.getElementById("confirm").open`)
}

// shoot saves screenshots of the screen under METANODE_SCREENSHOTS (make
// screenshots): desktop and 360 px wide, light, and dark when asked.
func (p page) shoot(name string, dark bool) {
	dir := os.Getenv("METANODE_SCREENSHOTS")
	if dir == "" {
		return
	}
	p.t.Helper()
	type shot struct {
		suffix string
		w, h   int64
		scheme string
	}
	shots := []shot{{"", 1280, 900, "light"}, {"-narrow", 360, 780, "light"}}
	if dark {
		shots = append(shots, shot{"-dark", 1280, 900, "dark"}, shot{"-narrow-dark", 360, 780, "dark"})
	}
	for _, s := range shots {
		if err := chromedp.Do(p.ctx, chromedp.EmulateViewport(s.w, s.h)); err != nil {
			p.t.Fatal(err)
		}
		if _, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s.scheme}}}); err != nil {
			p.t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // screenshots only: let the layout settle after the resize
		png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+s.suffix+".png"), png, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
	_ = chromedp.Do(p.ctx, chromedp.EmulateViewport(1280, 900))
	_, _ = chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
}

// TestUI_OwnersPage drives the owner's page of two real nodes in headless
// Chromium: the overview, pairing the two from their pages (invite with
// its QR code on one, join with the code on the other), adding and
// removing trust with the confirmation, searching and opening a record
// whose winning claim shows, and the record changing live when claims
// are posted.
func TestUI_OwnersPage(t *testing.T) {
	if browsertest.Path() == "" {
		t.Skip("no chromium: .ci/run installs Debian's chromium package")
	}
	ctx := context.Background()
	cfgA := testConfig(t, dataDir(t, "a"))
	cfgA.FilesRoot = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfgA.FilesRoot, "dune.mkv"), []byte("a film, as far as the watcher knows"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := openNode(t, cfgA)
	b := openNode(t, testConfig(t, dataDir(t, "b")))

	// Overview of a real node.
	pa := openPage(t, a.APIURL()+"/#/overview")
	pa.wait("the overview", `(e => e && e.innerText === "Healthy")(document.getElementById("health-status"))`)
	if got := pa.text("#overview"); !strings.Contains(got, a.UID()[:8]) || !strings.Contains(got, "Records") {
		t.Errorf("the overview does not show the node: %q", got)
	}
	pa.wait("the files root scanned", `document.getElementById("overview").innerText.includes("ok")`)
	pa.shoot("overview", true)

	// Pair B with A from the pages.
	pa.visit(a.APIURL() + "/#/pairing")
	pa.click("#make-invite")
	pa.wait("the code and its QR", `(q => q && q.complete && q.naturalWidth > 0)(document.getElementById("invite-qr"))`)
	code := eval[string](pa, `document.getElementById("invite-code").value`)
	if !strings.HasPrefix(code, node.InvitePrefix) {
		t.Fatalf("invite code %q", code)
	}
	pa.shoot("pairing", false)
	pb := openPage(t, b.APIURL()+"/#/pairing")
	pb.set("#join-code", code)
	pb.click("#join")
	pb.wait("the join to finish", `(e => e && e.innerText === "Joined")(document.getElementById("join-state"))`)
	pb.shoot("pairing-joined", false)
	trusts := func(n *node.Node, uid string) bool {
		tl, err := n.TrustList(ctx)
		return err == nil && slices.ContainsFunc(tl.Trusted, func(e store.TrustEntry) bool { return e.UID == uid && e.Source == "list" })
	}
	if !trusts(a, b.UID()) || !trusts(b, a.UID()) {
		t.Fatalf("after the join from the page: A trusts B %v, B trusts A %v", trusts(a, b.UID()), trusts(b, a.UID()))
	}

	// Add and remove trust, each confirmed.
	stranger := signer(t).UID()
	pa.visit(a.APIURL() + "/#/trust")
	pa.set("#trust-uid", stranger)
	pa.click("#trust-add")
	pa.confirm()
	row := fmt.Sprintf(`#table-trusted tr[data-uid=%q]`, stranger)
	pa.wait("the new trust row", fmt.Sprintf(`!!document.querySelector(%q)`, row))
	if !trusts(a, stranger) {
		t.Fatal("trust added on the page, not in the node")
	}
	if why := pa.text(row + " td.why"); why != "added by hand" {
		t.Errorf("why the new entry is there: %q", why)
	}
	if why := pa.text(fmt.Sprintf(`#table-trusted tr[data-uid=%q] td.why`, b.UID())); !strings.HasPrefix(why, "paired") {
		t.Errorf("why B is there: %q", why)
	}
	pa.shoot("trust", true)
	pa.click(row + " button.remove")
	pa.confirm()
	pa.wait("the row to leave the trusted list", fmt.Sprintf(`!document.querySelector(%q) && !!document.querySelector('#table-distrusted tr[data-uid=%q]')`, row, stranger))
	if trusts(a, stranger) || !a.Store().Distrusted(stranger) {
		t.Fatal("trust removed on the page, not in the node")
	}

	// Peers: B is connected, direct.
	pa.visit(a.APIURL() + "/#/peers")
	pa.wait("B among the peers", fmt.Sprintf(`!!document.querySelector('#table-peers tr[data-peer=%q]')`, b.PeerID()))
	pa.shoot("peers", false)

	// Search, open a record, see the winning claim; then watch it change.
	cid := testCID(23)
	w1, w2, w3 := signer(t), signer(t), signer(t)
	post := func(claims ...store.Claim) {
		t.Helper()
		res, err := api.NewClient(a.APIURL()).PostClaims(ctx, claims)
		if err != nil || res.Accepted != len(claims) {
			t.Fatalf("post: %+v %v", res, err)
		}
	}
	ts := nowMS()
	post(w1.Text(cid, "title", "Heat", ts), w2.Text(cid, "title", "Heat", ts+1), w3.Text(cid, "title", "Ronin", ts+2),
		w1.Text(cid, "year", "1995", ts))
	pa.visit(a.APIURL() + "/#/records")
	pa.set("#search-q", "heat")
	pa.click("#search-go")
	pa.wait("the one hit", `(e => e && e.innerText === "1 record") (document.getElementById("search-total")) && !!document.querySelector("#results a.hit")`)
	pa.shoot("records", true)
	pa.click("#results a.hit")
	won := `(e => e ? e.innerText : "")(document.querySelector('#field-title tr[data-why="won"] td.value'))`
	pa.wait("the winning claim", won+` === "Heat"`)
	if v := pa.text(`#table-fields tr[data-key="title"] td.value`); v != "Heat" {
		t.Errorf("merged title %q", v)
	}
	pa.shoot("record", true)
	w4, w5 := signer(t), signer(t)
	post(w4.Text(cid, "title", "Ronin", ts+3), w5.Text(cid, "title", "Ronin", ts+4))
	pa.wait("the title to change live", `(e => e && e.innerText === "Ronin")(document.querySelector('#table-fields tr[data-key="title"] td.value'))`)
	pa.wait("the winner to follow", won+` === "Ronin"`)

	// Files: the root's state and its latest events.
	pa.visit(a.APIURL() + "/#/files")
	pa.wait("the file's add event", `document.getElementById("table-files").innerText.includes("dune.mkv")`)
	pa.shoot("files", false)
}
