package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// reservedKV are the cache prefixes the store derives; services cannot
// write them through the scratch API.
var reservedKV = []string{"file:", "cid:", "idx:", "ev:", "evhwm:", "meta:"}

func checkKV(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrBadKey)
	}
	for _, p := range reservedKV {
		if strings.HasPrefix(key, p) {
			return fmt.Errorf("%w: %q starts with the reserved prefix %q", ErrReservedKV, key, p)
		}
	}
	return nil
}

// KVGet reads a service scratch key.
func (s *Store) KVGet(ctx context.Context, key string) (_ string, _ bool, err error) {
	defer s.noteRead(&err)
	if err := checkKV(key); err != nil {
		return "", false, err
	}
	if err := s.ready(); err != nil {
		return "", false, err
	}
	var v string
	err = s.cacheR.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = ?`, key).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("kv get: %w", err)
	}
	return v, true, nil
}

// KVPut writes a service scratch key; reserved prefixes give ErrReservedKV.
func (s *Store) KVPut(ctx context.Context, key, value string) error {
	if err := checkKV(key); err != nil {
		return err
	}
	if err := s.do(ctx, &request{kind: reqKVPut, key: key, value: value}); err != nil {
		return fmt.Errorf("kv put: %w", err)
	}
	return nil
}

// KVDelete deletes a service scratch key and reports whether it existed.
func (s *Store) KVDelete(ctx context.Context, key string) (bool, error) {
	if err := checkKV(key); err != nil {
		return false, err
	}
	r := &request{kind: reqKVDel, key: key}
	if err := s.do(ctx, r); err != nil {
		return false, fmt.Errorf("kv delete: %w", err)
	}
	return r.existed, nil
}

// Clear wipes both databases (trust list and identity excepted) and returns
// how many claims were deleted. Scratch keys, local files and both event
// streams go too; every cursor issued before gets a Gap.
func (s *Store) Clear(ctx context.Context) (int, error) {
	r := &request{kind: reqClear}
	if err := s.do(ctx, r); err != nil {
		return 0, fmt.Errorf("clear: %w", err)
	}
	return r.cleared, nil
}
