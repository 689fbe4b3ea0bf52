package store_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// conflictingClaims builds a claim set meant to stress convergence: a few
// signers voting on few cids and keys, values that differ only by case or
// spaces, equal timestamps, retractions, ciphertext, links and their
// retractions, and exact duplicates.
func conflictingClaims(seed uint64, n int) []store.Claim {
	r := rand.New(rand.NewPCG(seed, 7))
	signers := storetest.Signers(4)
	cids := []string{storetest.CID(100), storetest.CID(101), storetest.CID(102), storetest.CID(103), storetest.CID(104), storetest.CID(105)}
	values := []string{"Matrix", "matrix ", "MATRIX", "Dune", "dune", " Straße", "STRASSE", "x"}
	type spec struct {
		s int
		c store.Claim
	}
	specs := make([]spec, n)
	for i := range specs {
		c := store.Claim{CID: cids[r.IntN(len(cids))], Key: []string{"title", "year", "genres/Drama", "sizeByte"}[r.IntN(4)],
			Kind: store.KindText, TS: uint64(1 + r.IntN(12))}
		c.Value = []byte(values[r.IntN(len(values))])
		switch k := r.IntN(20); {
		case k < 2:
			c.Kind, c.Value = store.KindRetraction, nil
		case k < 3:
			c.Kind = store.KindCipher
		case k < 6:
			// Few link keys, so that a link and its retraction by one
			// signer meet, in both orders.
			c.CID = cids[r.IntN(2)]
			other := []string{cids[3], cids[4], storetest.CID(200)}[r.IntN(3)] // CID(200): nobody claims it
			c.Key, c.Value = "cids/"+other, []byte("true")
			if r.IntN(2) == 0 {
				c.Kind, c.Value = store.KindRetraction, nil
			}
			specs[i] = spec{r.IntN(2), c}
			continue
		}
		specs[i] = spec{r.IntN(len(signers)), c}
	}
	claims := storetest.Claims(n, func(i int) (*store.Signer, store.Claim) { return signers[specs[i].s], specs[i].c })
	// Exact duplicates.
	for range n / 10 {
		claims = append(claims, claims[r.IntN(len(claims))])
	}
	return claims
}

// convergedView is what two nodes with the same claims must agree on,
// independent of their local rids: the stored rows, and each record's
// merged fields keyed by its sorted cids.
func convergedView(t testing.TB, s *store.Store) (rows []string, records map[string]string) {
	t.Helper()
	all, err := s.ClaimsInRange(ctx, store.MinSyncItem, store.MaxSyncItem, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		rows = append(rows, c.ID().String())
	}
	slices.Sort(rows)
	records = map[string]string{}
	rids, err := s.RIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rid := range rids {
		rec := record(t, s, rid)
		keys := slices.Sorted(maps.Keys(rec.Fields))
		var sb strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&sb, "%s=%q;", k, rec.Fields[k])
		}
		records[strings.Join(rec.CIDs, ",")] = sb.String()
	}
	return rows, records
}

// TestOrderIndependence: any permutation of a claim set, in any batching,
// yields identical truth rows and merged views; and the incrementally
// applied cache equals a full rebuild.
func TestOrderIndependence(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("Seed", seed), func(t *testing.T) {
			orderIndependent(t, seed, conflictingClaims(seed, 90), store.Config{}, nil)
		})
	}
}

// TestOrderIndependence_Homes: the same with homes that change while the
// claims arrive: vouches and their withdrawals by the own uid and two
// signers trusted directly move the voting signers between homes (and a
// voter that is itself a voucher), in every order.
func TestOrderIndependence_Homes(t *testing.T) {
	signers := storetest.Signers(4)
	vouchers := []*store.Signer{signers[0], signers[1], storetest.Signer(5)}
	cfg := store.Config{Trust: store.TrustOpen, OwnUID: signers[0].UID()}
	trust := func(t *testing.T, s *store.Store) {
		for _, v := range vouchers[1:] {
			if err := s.Trust(ctx, v.UID(), ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("Seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			claims := conflictingClaims(seed, 90)
			for range 40 {
				v := vouchers[r.IntN(len(vouchers))]
				who := signers[1+r.IntN(3)]
				claims = append(claims, vouch(t, v, who.UID(), uint64(1+r.IntN(12)), r.IntN(3) > 0))
			}
			orderIndependent(t, seed, claims, cfg, trust)
		})
	}
}

// orderIndependent submits claims in four random orders and batchings to
// new stores (cfg with fresh paths, setup run after Open) and compares
// their truth rows and merged views; the first one's cache must equal a
// full rebuild's.
func orderIndependent(t *testing.T, seed uint64, claims []store.Claim, cfg store.Config, setup func(*testing.T, *store.Store)) {
	var wantRows []string
	var wantRecords map[string]string
	r := rand.New(rand.NewPCG(seed, 99))
	for perm := range 4 {
		order := slices.Clone(claims)
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		c := cfg
		c.TruthPath, c.CachePath = paths(t)
		s := reopen(t, c)
		if setup != nil {
			setup(t, s)
		}
		for lo := 0; lo < len(order); {
			hi := min(len(order), lo+1+r.IntN(25))
			if _, err := s.Submit(ctx, order[lo:hi], store.SubmitOptions{}); err != nil {
				t.Fatal(err)
			}
			lo = hi
		}
		rows, records := convergedView(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if perm == 0 {
			wantRows, wantRecords = rows, records
			if len(records) == 0 || len(rows) == 0 {
				t.Fatal("empty view")
			}
			want, _ := rebuiltWithSync(t, c)
			diffMaps(t, dumpCache(t, c.CachePath), want)
			continue
		}
		if !slices.Equal(rows, wantRows) {
			t.Fatalf("permutation %d: %d truth rows differ from %d", perm, len(rows), len(wantRows))
		}
		diffMaps(t, records, wantRecords)
	}
}
