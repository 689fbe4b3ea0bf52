package store

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestRuntimeRebuild_RetriedAfterFailure: a runtime rebuild that fails
// inside its transaction (a full disk, a damaged cache page) leaves the
// cache to the next write's catch-up, whose rebuild must be able to run:
// the truth file it attaches was detached, after the rollback.
func TestRuntimeRebuild_RetriedAfterFailure(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	next := failLinkThenCatchUp(t, s, sg, testCID(81), testCID(82), testCID(83))
	FailNextCache(s) // the catch-up's rebuild fails at its commit
	if err := next(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write with a failing rebuild: %v", err)
	}
	if _, err := s.Submit(ctx, []Claim{sg.Text(testCID(84), "title", "again", 4)}, SubmitOptions{}); err != nil {
		t.Fatalf("the next write's rebuild: %v", err)
	}
	if rec, err := s.Record(ctx, testCID(82), ""); err != nil || rec.Fields["cids/"+testCID(81)] != "true" {
		t.Fatalf("after the rebuild: %+v, %v", rec, err)
	}
}

// TestGroups_RidsAfter: the scrub's cursor walks every rid once, in order.
func TestGroups_RidsAfter(t *testing.T) {
	g := newGroups()
	var want []string
	for i := range 100 {
		rid := NewRID()
		g.add(testCID(i), rid)
		want = append(want, rid)
	}
	slices.Sort(want)
	var got []string
	for after := ""; ; {
		page := g.ridsAfter(after, 7)
		got = append(got, page...)
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %d rids, want %d in order", len(got), len(want))
	}
}
