package store

import (
	"context"
	"encoding/json"
	"time"
)

// The scrub verifies the signature of every stored claim in the
// background, so that damage at rest is found where nothing reads it: a
// claim no peer asks for and no merge touches. It walks the claim table in
// primary-key order, a page at a time, paced so that a pass over every
// claim takes about ScrubConfig.Period, at no less than scrubMinRate and
// no more than ScrubConfig.MaxRate claims a second: with the defaults a
// million claims take 12 h at 23 claims a second (docs/benchmarks.md has
// its CPU). A row whose id or signature does not hold goes to the writer
// (damage.go), which alone writes. The scrub's place is kept in the cache
// (meta:scrub), saved every scrubSaveEvery and at the end of a pass, so a
// restart goes on where it was rather than starting the pass over.

// Scrub defaults.
const (
	DefaultScrubPeriod  = 12 * time.Hour
	DefaultScrubMaxRate = 100.0 // claims a second
	DefaultScrubDelay   = time.Minute
)

const (
	scrubMinRate   = 1.0              // claims a second, however small the store
	scrubPage      = 64               // claims read at once, at most
	scrubTick      = 5 * time.Second  // a page holds at most this long's worth of the rate
	scrubSaveEvery = 5 * time.Minute  // how often the place is saved
	scrubRetry     = 10 * time.Minute // after a read failed (a damaged page: ReadHealth says so)
	scrubKey       = "meta:scrub"
)

// ScrubConfig paces the background signature check. Zero fields take the
// defaults.
type ScrubConfig struct {
	Period  time.Duration // a pass over every claim takes about this long; negative: no scrub
	MaxRate float64       // claims verified a second, at most
	Delay   time.Duration // from Open to the first page
}

func (c ScrubConfig) withDefaults() ScrubConfig {
	if c.Period == 0 {
		c.Period = DefaultScrubPeriod
	}
	if c.MaxRate <= 0 {
		c.MaxRate = DefaultScrubMaxRate
	}
	if c.Delay <= 0 {
		c.Delay = DefaultScrubDelay
	}
	return c
}

// scrubPos is where the scrub is: after this primary key, n claims into
// the pass.
type scrubPos struct {
	CID string `json:"cid"`
	Key string `json:"key"`
	PID int64  `json:"pid"`
	N   int64  `json:"n"`
}

// scrub runs until the store closes.
func (s *Store) scrub() {
	defer s.wg.Done()
	cfg := s.cfg.Scrub
	pos := s.loadScrubPos()
	saved := time.Now()
	wait := cfg.Delay
	for {
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		rate := s.scrubRate()
		s.met.scrubRate.Set(rate)
		n := min(scrubPage, max(1, int(rate*scrubTick.Seconds())))
		next, count, end, err := s.scrubPage(pos, n)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("scrub: reading claims failed; trying again later", "err", err)
			}
			wait = scrubRetry
			continue
		}
		pos = next
		s.met.scrubChecked.Add(float64(count))
		wait = time.Duration(float64(count) / rate * float64(time.Second))
		if end {
			wait = max(wait, scrubTick) // an empty or tiny store: no busy loop
			s.met.scrubPasses.Inc()
			s.log.Debug("scrub: pass done", "claims", pos.N)
			pos = scrubPos{}
		}
		if total := s.stats.live.Load() + s.stats.tomb.Load(); total > 0 {
			s.met.scrubPass.Set(min(1, float64(pos.N)/float64(total)))
		}
		if end || time.Since(saved) >= scrubSaveEvery {
			s.saveScrubPos(pos)
			saved = time.Now()
		}
	}
}

// scrubRate is the pace for the store's size now, in claims a second.
func (s *Store) scrubRate() float64 {
	cfg := s.cfg.Scrub
	total := float64(s.stats.live.Load() + s.stats.tomb.Load())
	return min(cfg.MaxRate, max(scrubMinRate, total/cfg.Period.Seconds()))
}

// scrubPage checks up to n claims after pos and returns where it stopped,
// how many it checked, and whether the table ended.
func (s *Store) scrubPage(pos scrubPos, n int) (_ scrubPos, count int, end bool, err error) {
	defer s.noteRead(&err)
	rows, err := s.truthR.QueryContext(s.ctx, `SELECT cid, key, pid, value, ts, id, sig FROM claim
		WHERE (cid, key, pid) > (?, ?, ?) ORDER BY cid, key, pid LIMIT ?`, pos.CID, pos.Key, pos.PID, n)
	if err != nil {
		return pos, 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var cid, key, pid, val, ts, id, sig any
		if err := rows.Scan(&cid, &key, &pid, &val, &ts, &id, &sig); err != nil {
			return pos, count, false, err
		}
		ref := damageRef{asString(cid), asString(key), asInt(pid)}
		r := rowFromValue(ref.pid, val, asInt(ts), asID(id))
		if !s.intact(ref.cid, ref.key, &r) || !s.sigHolds(ref, &r, sig) {
			s.met.scrubDamaged.Inc()
			s.reportDamage(ref)
		}
		pos = scrubPos{CID: ref.cid, Key: ref.key, PID: ref.pid, N: pos.N + 1}
		count++
	}
	if err := rows.Err(); err != nil {
		return pos, count, false, err
	}
	return pos, count, count < n, nil
}

// sigHolds verifies a row's signature over its (intact) id.
func (s *Store) sigHolds(ref damageRef, r *row, sig any) bool {
	b, _ := sig.([]byte)
	if len(b) != SigBytes {
		return false
	}
	c := claimOf(s.princ.uidOf(ref.pid), ref.cid, ref.key, r, b)
	return c.VerifyID(r.id) == nil
}

// loadScrubPos reads where the last scrub stopped (the start when unknown).
func (s *Store) loadScrubPos() scrubPos {
	var v string
	var pos scrubPos
	if err := s.cacheR.QueryRowContext(s.ctx, `SELECT v FROM kv WHERE k = ?`, scrubKey).Scan(&v); err != nil {
		return pos
	}
	if json.Unmarshal([]byte(v), &pos) != nil {
		return scrubPos{}
	}
	return pos
}

// saveScrubPos has the writer keep the scrub's place in the cache.
func (s *Store) saveScrubPos(pos scrubPos) {
	b, _ := json.Marshal(pos)
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if err := s.do(ctx, &request{kind: reqKVPut, key: scrubKey, value: string(b)}); err != nil && s.ctx.Err() == nil {
		s.log.Debug("scrub: saving its place failed", "err", err)
	}
}
