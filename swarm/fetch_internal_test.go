package swarm

import (
	"fmt"
	"testing"
)

// interestBatches: a short list is asked whole; a long one is asked as its
// head plus a window of the rest, bounded, without repeats, and the
// windows of all offsets cover the whole list.
func TestInterestBatches(t *testing.T) {
	short := make([]string, maxInterestFetches*maxFetchCIDs)
	for i := range short {
		short[i] = fmt.Sprint(i)
	}
	if got := flatten(interestBatches(short, 12345)); len(got) != len(short) || got[0] != "0" || got[len(got)-1] != short[len(short)-1] {
		t.Fatalf("short list: %d cids asked", len(got))
	}
	long := make([]string, 3*len(short)+17)
	for i := range long {
		long[i] = fmt.Sprint(i)
	}
	covered := map[string]bool{}
	step := maxFetchCIDs * (maxInterestFetches - 1)
	for off := 0; off < len(long)+step; off += step / 2 {
		bs := interestBatches(long, off)
		if len(bs) > maxInterestFetches {
			t.Fatalf("offset %d: %d requests", off, len(bs))
		}
		seen := map[string]bool{}
		for i, b := range bs {
			if len(b) > maxFetchCIDs || len(b) == 0 {
				t.Fatalf("offset %d: request %d of %d cids", off, i, len(b))
			}
			for _, c := range b {
				if seen[c] {
					t.Fatalf("offset %d: %s asked twice", off, c)
				}
				seen[c] = true
				covered[c] = true
			}
		}
		if len(seen) != maxInterestFetches*maxFetchCIDs || !seen["0"] || !seen[fmt.Sprint(maxFetchCIDs-1)] {
			t.Fatalf("offset %d: %d cids asked, head included: %v", off, len(seen), seen["0"])
		}
	}
	if len(covered) != len(long) {
		t.Fatalf("the windows cover %d of %d cids", len(covered), len(long))
	}
}

func flatten(bs [][]string) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}
