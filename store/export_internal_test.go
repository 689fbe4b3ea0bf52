package store

import "errors"

// VerifyTabled verifies c through a key table built at once (the path a
// frequent signer takes), so that the external tests run their vectors and
// rejections through it too.
func VerifyTabled(c *Claim) error { return newKeyCache(1).verify(c, c.ID()) }

// SetRemerge sets a store's re-merge chunk size and a hook the writer calls
// before each chunk with the records still due (before Open).
func SetRemerge(s *Store, chunk int, before func(due int)) {
	s.remergeChunk, s.beforeRemerge = chunk, before
}

// Queued is the number of requests waiting for the writer.
func Queued(s *Store) int { return len(s.reqs) }

// StopWriter ends the writer loop as Close does, without waiting for it
// (callable from the writer's own hooks).
func StopWriter(s *Store) { s.cancel(ErrClosed) }

// FailNextCache fails the next cache transaction.
func FailNextCache(s *Store) {
	s.failCache = func() error { s.failCache = nil; return errors.New("disk full") }
}

// FailCacheAt fails the n-th cache transaction from now (1: the next).
func FailCacheAt(s *Store, n int) {
	s.failCache = func() error {
		n--
		if n > 0 {
			return nil
		}
		s.failCache = nil
		return errors.New("disk full")
	}
}
