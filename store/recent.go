package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// MaxRecentEvents bounds RecentEvents.
const MaxRecentEvents = 500

// RecentEvents returns the newest n (at most MaxRecentEvents) retained
// events of st, oldest first: what the owner's page shows before it
// follows the stream after the last one.
func (s *Store) RecentEvents(ctx context.Context, st Stream, n int) (_ []Event, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	n = min(max(n, 1), MaxRecentEvents)
	rows, err := s.cacheR.QueryContext(ctx, `SELECT k, v FROM kv WHERE k > ? AND k < ? ORDER BY k DESC LIMIT ?`,
		evPrefix(st), evEnd(st), n)
	if err != nil {
		return nil, fmt.Errorf("recent events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("recent events: %w", err)
		}
		out = append(out, Event{ID: strings.TrimPrefix(k, evPrefix(st)), Type: eventType(v), Data: []byte(v)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent events: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}
