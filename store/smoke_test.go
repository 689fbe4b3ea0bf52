package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/metanode/metanode/store"
)

func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	s := store.New(store.Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: store.TrustOpen})
	ctx := context.Background()
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sg, _ := store.GenerateSigner()
	const cid = "bagacbabaeddealivdfucjicjvwd4g4nfar5gonjvykwimb7cx6sih52zdtbhu"
	res, err := s.Submit(ctx, []store.Claim{sg.Text(cid, "title", "Inception", 1000), sg.Text(cid, "year", "2010", 1000)}, store.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%v %v %v", r.Outcome, r.Err, r.Stored)
	}
	rec, err := s.Record(ctx, cid, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rec)
}
