package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestSearch_Limits: a search past a limit is refused with its sentinel
// before it reads anything; one at the limit runs.
func TestSearch_Limits(t *testing.T) {
	t.Parallel()
	s := open(t, store.Config{})
	submit(t, s, storetest.Signer(0).Text(storetest.CID(1), "title", "Up", 1))
	values := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.Repeat("v", size)
		}
		return out
	}
	filters := func(n int) []store.SearchFilter {
		return slices.Repeat([]store.SearchFilter{{Property: "title", Values: []string{"x"}}}, n)
	}
	words := func(n int) string { return strings.TrimSpace(strings.Repeat("up ", n)) }
	for _, c := range []struct {
		name string
		q    store.SearchQuery
		want error
	}{
		{"QueryAtLimit", store.SearchQuery{Query: strings.Repeat("u", store.MaxSearchQuery)}, nil},
		{"QueryPastLimit", store.SearchQuery{Query: strings.Repeat("u", store.MaxSearchQuery+1)}, store.ErrQueryTooLong},
		{"HugeQuery", store.SearchQuery{Query: strings.Repeat("matrix ", 100_000/7)}, store.ErrQueryTooLong},
		{"WordsAtLimit", store.SearchQuery{Query: words(store.MaxSearchTokens)}, nil},
		{"WordsPastLimit", store.SearchQuery{Query: words(store.MaxSearchTokens + 1)}, store.ErrQueryTooLong},
		{"FiltersAtLimit", store.SearchQuery{Filters: filters(store.MaxSearchFilters)}, nil},
		{"FiltersPastLimit", store.SearchQuery{Filters: filters(store.MaxSearchFilters + 1)}, store.ErrFiltersTooLarge},
		{"ValuesAtLimit", store.SearchQuery{Filters: []store.SearchFilter{{Property: "title", Values: values(store.MaxSearchValues, 1)}}}, nil},
		{"ValuesPastLimit", store.SearchQuery{Filters: []store.SearchFilter{{Property: "title", Values: values(store.MaxSearchValues/2, 1)},
			{Property: "year", Values: values(store.MaxSearchValues/2+1, 1)}}}, store.ErrFiltersTooLarge},
		{"ValuePastLimit", store.SearchQuery{Filters: []store.SearchFilter{{Property: "title", Values: values(1, store.MaxSearchTerm+1)}}}, store.ErrFiltersTooLarge},
		{"PropertyPastLimit", store.SearchQuery{Filters: []store.SearchFilter{{Property: strings.Repeat("p", store.MaxSearchTerm+1), Values: []string{"x"}}}}, store.ErrFiltersTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := s.Search(ctx, c.q)
			if !errors.Is(err, c.want) || (err != nil) != (c.want != nil) {
				t.Fatalf("search: %v, want %v", err, c.want)
			}
		})
	}
}

// TestSearch_ShortWords: words of one or two characters are served (by
// the search rows, no record read but the page's), as a user expects of a
// title "Up" or a show "24".
func TestSearch_ShortWords(t *testing.T) {
	t.Parallel()
	s := open(t, store.Config{})
	sg := storetest.Signer(0)
	titles := []string{"Up", "24", "Superman", "Group Day", "The Matrix", "2046", "Ö"}
	for i, title := range titles {
		submit(t, s, sg.Text(storetest.CID(100+i), "title", title, 1))
	}
	rid := func(i int) string { return record(t, s, storetest.CID(100+i)).RID }
	for _, c := range []struct {
		query string
		want  []int // records that must be hits (a rid may hold digits too)
		not   []int
	}{
		{"up", []int{0, 2, 3}, []int{1, 4}},
		{"UP", []int{0, 2, 3}, []int{1, 4}},
		{"24", []int{1}, nil},
		{"ö", []int{6}, []int{0}},
		{"up day", []int{3}, []int{0, 2}},
	} {
		hits, total, err := s.Search(ctx, store.SearchQuery{Query: c.query})
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(hits))
		for i, h := range hits {
			got[i] = h.RID
		}
		if total != len(hits) {
			t.Errorf("%q: total %d, %d hits", c.query, total, len(hits))
		}
		for _, i := range c.want {
			if !slices.Contains(got, rid(i)) {
				t.Errorf("%q misses %q", c.query, titles[i])
			}
		}
		for _, i := range c.not {
			if slices.Contains(got, rid(i)) {
				t.Errorf("%q finds %q", c.query, titles[i])
			}
		}
	}
}

// TestSearch_Admission: searches take a slot each; past the slots they
// wait in a bounded queue, for a bounded time, then are refused with
// ErrBusy; record reads are served all along (their own connections).
func TestSearch_Admission(t *testing.T) {
	t.Parallel()
	dir, reg := t.TempDir(), prometheus.NewRegistry()
	s := store.New(store.Config{TruthPath: dir + "/t.db", CachePath: dir + "/c.db", Trust: store.TrustOpen, Registerer: reg,
		Search: store.SearchConfig{Slots: 1, Queue: 1, Wait: 100 * time.Millisecond}, Logger: storetest.Logger(t, 8)})
	h := storetest.HoldSearches(s)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := storetest.CID(1)
	submit(t, s, storetest.Signer(0).Text(c, "title", "Up", 1))

	first := make(chan error, 1)
	go func() { _, _, err := s.Search(ctx, store.SearchQuery{Query: "up"}); first <- err }()
	if err := h.Wait(t); err != nil {
		t.Fatal(err)
	}
	// The slot is held: one search may wait, for 100 ms; the next is
	// refused at once.
	second := make(chan error, 1)
	go func() { _, _, err := s.Search(ctx, store.SearchQuery{Query: "up"}); second <- err }()
	for i := 0; searchesIn(t, reg, "waiting") != 1; i++ {
		if i == 1000 {
			t.Fatal("the second search never waited for the slot")
		}
		time.Sleep(time.Millisecond)
	}
	if _, _, err := s.Search(ctx, store.SearchQuery{Query: "up"}); !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "waiting already") {
		t.Fatalf("a search past the queue: %v, want ErrBusy at once", err)
	}
	for range 20 {
		if _, err := s.Record(ctx, c, ""); err != nil {
			t.Fatalf("a record read while searches hold every slot: %v", err)
		}
	}
	if err := <-second; !errors.Is(err, store.ErrBusy) {
		t.Fatalf("a search that waited past its time: %v, want ErrBusy", err)
	}
	h.Release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, total, err := s.Search(ctx, store.SearchQuery{Query: "up"}); err != nil || total != 1 {
		t.Fatalf("after the slot came free: %d, %v", total, err)
	}
}

// searchesIn reads the gauge of searches in state (running, waiting).
func searchesIn(t *testing.T, reg *prometheus.Registry, state string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "metanode_store_searches" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestSearch_Budget: a search that outlives its time budget stops with
// ErrSearchTimeout (not the caller's error), and one whose caller went away
// stops with the caller's error; either way its slot is free again.
func TestSearch_Budget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := store.New(store.Config{TruthPath: dir + "/t.db", CachePath: dir + "/c.db", Trust: store.TrustOpen,
		Search: store.SearchConfig{Slots: 1, Timeout: 50 * time.Millisecond}, Logger: storetest.Logger(t, 8)})
	h := storetest.HoldSearches(s)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, _, err := s.Search(ctx, store.SearchQuery{Query: "up"}); !errors.Is(err, store.ErrSearchTimeout) {
		t.Fatalf("a search held past its budget: %v, want ErrSearchTimeout", err)
	}
	if err := h.Wait(t); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(t); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the held search saw %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, _, err := s.Search(cctx, store.SearchQuery{Query: "up"}); done <- err }()
	if err := h.Wait(t); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrSearchTimeout) {
		t.Fatalf("a search whose caller went away: %v, want context.Canceled", err)
	}
}
