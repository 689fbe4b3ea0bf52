package store_test

import (
	"errors"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestFiles_PeerIDCIDRefused: a node's peer-id cid (libp2p-key) is no
// file's content: ApplyFiles refuses it with ErrBadCID and stores nothing,
// so the vouch claims on that cid never become a record.
func TestFiles_PeerIDCIDRefused(t *testing.T) {
	s := open(t, store.Config{})
	sg := storetest.Signer(0)
	pc, err := store.PeerIDCID(sg.UID())
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []store.FileOp{store.FileAdd, store.FileChange, store.FileRename} {
		u := store.FileUpdate{Op: op, File: store.LocalFile{Path: "/files/x", CID: pc, Size: 1}, OldPath: "/files/old"}
		if _, err := s.ApplyFiles(ctx, []store.FileUpdate{u}); !errors.Is(err, store.ErrBadCID) {
			t.Fatalf("%s of a peer-id cid: %v, want ErrBadCID", op, err)
		}
	}
	submit(t, s, sg.Text(pc, "vouch/"+storetest.Signer(1).UID(), "true", 1))
	if rec, err := s.Record(ctx, pc, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record of a peer-id cid: %v %v, want ErrNotFound", rec.Fields, err)
	}
	if files, err := s.LocalFiles(ctx); err != nil || len(files) != 0 {
		t.Fatalf("local files: %v %v, want none", files, err)
	}
}
