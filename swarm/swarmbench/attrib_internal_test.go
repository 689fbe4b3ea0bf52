package swarmbench

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/pprof/profile"
)

// labelledProfile encodes a CPU profile in the runtime's layout (samples
// and cpu values, 10 ms period) whose samples carry the given node labels
// and stacks (leaf first).
func labelledProfile(t testing.TB, samples []testSample) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name}
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
		p.Location = append(p.Location, l)
		locs[name] = l
		return l
	}
	for _, s := range samples {
		smp := &profile.Sample{Value: []int64{s.ticks, s.ticks * p.Period}}
		if s.labels != nil {
			smp.Label = map[string][]string{nodeLabel: s.labels}
		}
		for _, fn := range s.stack {
			smp.Location = append(smp.Location, loc(fn))
		}
		p.Sample = append(p.Sample, smp)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type testSample struct {
	labels []string
	ticks  int64
	stack  []string
}

var splitSamples = []testSample{
	{[]string{"B"}, 5, []string{"secp256k1.mul", "store.VerifyAll.func1", "runtime.goexit"}},
	{[]string{"B"}, 2, []string{"sqlite.step", "store.(*Store).runWriter", "runtime.goexit"}},
	{[]string{"A"}, 2, []string{"sqlite.step", "swarm.serveSync", "runtime.goexit"}},
	{nil, 3, []string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker", "runtime.goexit"}},
	{nil, 1, []string{"runtime._GC"}},
	{[]string{"C"}, 4, []string{"elsewhere"}},
	{[]string{"A", "B"}, 1, []string{"elsewhere"}},
}

func TestAttribute(t *testing.T) {
	s, err := attribute(labelledProfile(t, splitSamples))
	if err != nil {
		t.Fatal(err)
	}
	got := [5]int64{s.total, s.a, s.b, s.none, s.other}
	if want := [5]int64{18, 2, 7, 4, 5}; got != want {
		t.Errorf("total, A, B, none, other = %v, want %v", got, want)
	}
	if s.period != 10_000_000 {
		t.Errorf("period %d ns, want 10 ms", s.period)
	}
	if got, want := s.topRoots(1), "runtime.gcBgMarkWorker 75%, other 25%"; got != want {
		t.Errorf("topRoots(1) = %q, want %q", got, want)
	}
	if got, want := s.topRoots(4), "runtime.gcBgMarkWorker 75%, runtime._GC 25%"; got != want {
		t.Errorf("topRoots(4) = %q, want %q", got, want)
	}
}

func TestAttribute_BadInput(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a profile at all\x00\xff"),
		"truncated": labelledProfile(t, splitSamples)[:40],
	} {
		if _, err := attribute(data); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := attribute(labelledProfile(t, nil)); !errors.Is(err, errNoSamples) {
		t.Errorf("a profile without samples: got %v, want errNoSamples", err)
	}
	// A profile of something else (heap: no "samples" value) is refused.
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}},
		Sample: []*profile.Sample{{Value: []int64{1}}}}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := attribute(buf.Bytes()); err == nil || errors.Is(err, errNoSamples) {
		t.Errorf("a heap profile: got %v, want a parse error", err)
	}
}

// FuzzAttribute: any input is refused with an error or split so that the
// parts add up to the whole; nothing panics.
func FuzzAttribute(f *testing.F) {
	valid := labelledProfile(f, splitSamples)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := attribute(data)
		if err != nil {
			return
		}
		if s.a+s.b+s.none+s.other != s.total || s.total <= 0 {
			t.Errorf("split %+v does not add up", s)
		}
	})
}
