package store

import (
	"encoding/json"
	"os"
	"testing"
)

// HomeVectors is testdata/home-merge-vectors.json.
type HomeVectors struct {
	Signers map[string]struct {
		PrivateKeyHex string `json:"privateKeyHex"`
		UID           string `json:"uid"`
	} `json:"signers"`
	Vectors []HomeVector `json:"vectors"`
}

// HomeVector is one case: a node's trust state, the votes on one field,
// each listed signer's home and the merged value.
type HomeVector struct {
	Name       string            `json:"name"`
	Mode       TrustMode         `json:"mode"`
	Own        string            `json:"own"`
	Trusted    []string          `json:"trusted"`
	Distrusted []string          `json:"distrusted"`
	Vouches    [][2]string       `json:"vouches"`
	Votes      []HomeVote        `json:"votes"`
	Homes      map[string]string `json:"homes"`
	Want       *struct {
		Value string `json:"value"`
		Homes int    `json:"homes"`
	} `json:"want"`
}

// HomeVote is one claim on the field; a nil Value is a retraction.
type HomeVote struct {
	Signer string  `json:"signer"`
	Value  *string `json:"value"`
	TS     uint64  `json:"ts"`
}

// LoadHomeVectors reads the vector file and checks each label's key.
func LoadHomeVectors(t testing.TB) (HomeVectors, map[string]*Signer) {
	t.Helper()
	b, err := os.ReadFile("testdata/home-merge-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var hv HomeVectors
	if err := json.Unmarshal(b, &hv); err != nil {
		t.Fatal(err)
	}
	keys := map[string]*Signer{}
	for label, k := range hv.Signers {
		s, err := SignerFromHex(k.PrivateKeyHex)
		if err != nil || s.UID() != k.UID {
			t.Fatalf("signer %s: %v (uid %s, want %s)", label, err, s.UID(), k.UID)
		}
		keys[label] = s
	}
	return hv, keys
}

// TestHomeVectors_Merge: the trust view places every listed signer in its
// home, and mergeRows merges the votes to the wanted value and home
// count, in any order of the rows.
func TestHomeVectors_Merge(t *testing.T) {
	hv, keys := LoadHomeVectors(t)
	for _, vec := range hv.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			v := &trustView{mode: vec.Mode, own: keys[vec.Own].UID(), list: map[string]trustRow{}, vouches: map[string]map[string]struct{}{}}
			for _, l := range vec.Trusted {
				v.list[keys[l].UID()] = trustRow{state: stateTrusted}
			}
			for _, l := range vec.Distrusted {
				v.list[keys[l].UID()] = trustRow{state: stateDistrusted}
			}
			for _, p := range vec.Vouches {
				v.setVouch(keys[p[0]].UID(), keys[p[1]].UID(), true)
			}
			v.build()
			label := map[string]string{}
			for l, s := range keys {
				label[s.UID()] = l
			}
			for l, want := range vec.Homes {
				uid := keys[l].UID()
				if !v.trusted(uid) {
					t.Fatalf("%s does not count", l)
				}
				if got := label[v.homeOf(uid)]; got != want {
					t.Errorf("home of %s = %s, want %s", l, got, want)
				}
			}
			pid := map[string]int64{}
			uidOf := map[int64]string{}
			var rows []row
			for i, vote := range vec.Votes {
				uid := keys[vote.Signer].UID()
				if _, ok := pid[uid]; !ok {
					pid[uid] = int64(len(pid) + 1)
					uidOf[pid[uid]] = uid
				}
				r := row{pid: pid[uid], kind: KindRetraction, ts: vote.TS, id: ID{byte(i)}}
				if vote.Value != nil {
					r.kind, r.val = KindText, *vote.Value
				}
				rows = append(rows, r)
			}
			home := func(p int64) (string, bool) {
				u := uidOf[p]
				return v.homeOf(u), v.trusted(u)
			}
			wantVal, wantN, wantOK := "", 0, vec.Want != nil
			if wantOK {
				wantVal, wantN = vec.Want.Value, vec.Want.Homes
			}
			for i := range len(rows) {
				// Every rotation of the rows: the order never matters.
				rs := append(append([]row(nil), rows[i:]...), rows[:i]...)
				got, n, ok := mergeRows(rs, home)
				if got != wantVal || n != wantN || ok != wantOK {
					t.Fatalf("rotation %d: merge = %q, %d homes, %v; want %q, %d, %v", i, got, n, ok, wantVal, wantN, wantOK)
				}
			}
		})
	}
}
