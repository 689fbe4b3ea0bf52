package store

import (
	"context"
	"errors"
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
