package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/metanode/metanode/store"
)

// maxSSELine bounds one SSE line: a 64 KiB value escaped in JSON fits.
const maxSSELine = 1 << 20

// Events follows an event stream ("meta" or "files") from lastID ("" for
// the live tail, "0-0" for a snapshot of the meta stream) and calls fn for
// each event in order. A gap arrives as an event of Type "gap". It returns
// when ctx ends (nil), fn fails (its error), or the server ends the stream
// (io.EOF: resume with the last id seen).
func (c *Client) Events(ctx context.Context, stream, lastID string, fn func(store.Event) error) error {
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		hdr.Set("Last-Event-ID", lastID)
	}
	resp, err := c.send(ctx, http.MethodGet, "/api/events/"+stream, "", nil, hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = ReadEvents(resp.Body, fn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ReadEvents parses an SSE body and calls fn per event. Comments (the
// keep-alive) are skipped; Event.ID is the frame's own id line ("" when it
// has none). It returns io.EOF at the end of the body.
func ReadEvents(r io.Reader, fn func(store.Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var (
		ev      store.Event
		data    bytes.Buffer
		hasData bool
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" { // dispatch
			if hasData {
				ev.Data = bytes.Clone(data.Bytes())
				if ev.Type == "" {
					ev.Type = "message"
				}
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, hasData = store.Event{}, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Type = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("read events: %w", err)
		}
		return err
	}
	return io.EOF
}
