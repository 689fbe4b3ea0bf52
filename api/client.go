package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/metanode/metanode/store"
)

// Client talks to a node's HTTP API; every CLI command uses it. Non-2xx
// answers come back as *Error (errors.Is(err, store.ErrNotFound) holds for
// any 404). It is safe for concurrent use.
type Client struct {
	base  string
	hc    *http.Client
	token string // sent as Authorization: Bearer when set
}

// NewClient returns a client for the API at baseURL ("http://127.0.0.1:9000";
// a bare host:port gets http://; "unix:///path/api.sock" talks to the
// node's Unix socket). It does no I/O.
func NewClient(baseURL string) *Client {
	base := strings.TrimRight(baseURL, "/")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	if sock, ok := strings.CutPrefix(base, "unix://"); ok {
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		base = "http://localhost"
	} else if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{base: base, hc: &http.Client{Transport: tr}}
}

// SetToken makes the client send the node's API token (docs/http.md "Who
// may use the API"); call it before the client is used.
func (c *Client) SetToken(token string) { c.token = strings.TrimSpace(token) }

// BaseURL returns the API base URL the client talks to.
func (c *Client) BaseURL() string { return c.base }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// MetaOptions qualify Client.Meta.
type MetaOptions struct {
	Remote bool   // on a local miss, ask the swarm (?remote=1)
	As     string // overlay this signer's votes (?as=)
}

// PostClaims submits claims (POST /api/claims), split into requests within
// the server's limits, and returns one result per claim in order. On an
// error the answer holds the results of the requests that succeeded.
func (c *Client) PostClaims(ctx context.Context, claims []store.Claim) (ClaimsResponse, error) {
	return c.PostClaimsRIDs(ctx, claims, nil)
}

// PostClaimsRIDs is PostClaims naming, by cid, the rid a record new to the
// node is to take (metanode import): each request carries the entries of
// the cids its claims name.
func (c *Client) PostClaimsRIDs(ctx context.Context, claims []store.Claim, rids map[string]string) (ClaimsResponse, error) {
	out := ClaimsResponse{Results: make([]ClaimResult, 0, len(claims))}
	const budget = MaxClaimsBody - 64<<10 // room for the envelope
	var body bytes.Buffer
	n := 0
	var chunkRIDs map[string]string // the rids entries of the request being built
	ridBytes := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		body.WriteByte(']')
		if len(chunkRIDs) > 0 {
			b, err := json.Marshal(chunkRIDs)
			if err != nil {
				return err
			}
			body.WriteString(`,"rids":`)
			body.Write(b)
		}
		body.WriteByte('}')
		var res ClaimsResponse
		if err := c.do(ctx, http.MethodPost, "/api/claims", "application/json", &body, &res); err != nil {
			return err
		}
		out.Results = append(out.Results, res.Results...)
		out.Accepted += res.Accepted
		out.Unchanged += res.Unchanged
		out.Stale += res.Stale
		out.Rejected += res.Rejected
		body.Reset()
		n, chunkRIDs, ridBytes = 0, nil, 0
		return nil
	}
	// No HTML escaping: "&" stays "&", the shorter form on the wire.
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	enc.SetEscapeHTML(false)
	for i := range claims {
		one.Reset()
		if err := enc.Encode(claims[i].ToJSON(false)); err != nil {
			return out, fmt.Errorf("post claims: encode claim %d: %w", i, err)
		}
		b := bytes.TrimSuffix(one.Bytes(), []byte("\n"))
		rid, hinted := rids[claims[i].CID]
		extra := 0
		if _, have := chunkRIDs[claims[i].CID]; hinted && !have {
			extra = len(claims[i].CID) + len(rid) + 6 // "cid":"rid",
		}
		if n == MaxClaims || (n > 0 && body.Len()+ridBytes+len(b)+extra+16 > budget) {
			if err := flush(); err != nil {
				return out, fmt.Errorf("post claims: %w", err)
			}
			if hinted {
				extra = len(claims[i].CID) + len(rid) + 6
			}
		}
		if n == 0 {
			body.WriteString(`{"claims":[`)
		} else {
			body.WriteByte(',')
		}
		body.Write(b)
		n++
		if extra > 0 {
			if chunkRIDs == nil {
				chunkRIDs = make(map[string]string)
			}
			chunkRIDs[claims[i].CID] = rid
			ridBytes += extra
		}
	}
	if len(claims) == 0 {
		body.WriteString(`{"claims":[`)
		n = 1 // post the empty batch: the server still answers (and checks health)
	}
	if err := flush(); err != nil {
		return out, fmt.Errorf("post claims: %w", err)
	}
	return out, nil
}

// Meta returns the merged record holding cid (GET /api/meta/{cid}).
func (c *Client) Meta(ctx context.Context, cid string, opt MetaOptions) (MetaResponse, error) {
	q := url.Values{}
	if opt.Remote {
		q.Set("remote", "1")
	}
	if opt.As != "" {
		q.Set("as", opt.As)
	}
	p := "/api/meta/" + url.PathEscape(cid)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out MetaResponse
	return out, c.get(ctx, p, &out)
}

// SwarmStatus returns the node's swarm state (GET /api/swarm/status).
func (c *Client) SwarmStatus(ctx context.Context) (SwarmStatus, error) {
	var out SwarmStatus
	return out, c.get(ctx, "/api/swarm/status", &out)
}

// SwarmPeers lists connected peers (GET /api/swarm/peers).
func (c *Client) SwarmPeers(ctx context.Context) ([]PeerInfo, error) {
	var out []PeerInfo
	return out, c.get(ctx, "/api/swarm/peers", &out)
}

// Trust returns the trust policy and the accepted signers (GET /api/trust).
func (c *Client) Trust(ctx context.Context) (TrustList, error) {
	var out TrustList
	return out, c.get(ctx, "/api/trust", &out)
}

// AddTrust puts uid on the trust list (PUT /api/trust/{uid}).
func (c *Client) AddTrust(ctx context.Context, uid string) error {
	return c.do(ctx, http.MethodPut, "/api/trust/"+url.PathEscape(uid), "", nil, nil)
}

// RemoveTrust distrusts uid (DELETE /api/trust/{uid}).
func (c *Client) RemoveTrust(ctx context.Context, uid string) error {
	return c.do(ctx, http.MethodDelete, "/api/trust/"+url.PathEscape(uid), "", nil, nil)
}

// Invite asks the node for a pairing code valid for ttl (0: the node's
// default) (POST /api/swarm/invite).
func (c *Client) Invite(ctx context.Context, ttl time.Duration) (InviteResponse, error) {
	var req InviteRequest
	if ttl > 0 {
		req.TTL = ttl.String()
	}
	b, _ := json.Marshal(req)
	var out InviteResponse
	return out, c.do(ctx, http.MethodPost, "/api/swarm/invite", "application/json", bytes.NewReader(b), &out)
}

// Health returns the node's health (GET /health).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var out Health
	return out, c.get(ctx, "/health", &out)
}

// RegisterFile registers a file under plugin/ (POST /api/files/register).
func (c *Client) RegisterFile(ctx context.Context, rel string) (RegisterResult, error) {
	b, _ := json.Marshal(RegisterRequest{Path: rel})
	var out RegisterResult
	return out, c.do(ctx, http.MethodPost, "/api/files/register", "application/json", bytes.NewReader(b), &out)
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, "", nil, out)
}

// do sends one request and decodes a 2xx JSON answer into out (when set).
func (c *Client) do(ctx context.Context, method, path, ctype string, body io.Reader, out any) error {
	resp, err := c.send(ctx, method, path, ctype, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// busyRetries is how often a request refused as busy (the server's body
// budget, 503 busy) is sent again, after the Retry-After it names (at most
// maxBusyWait each).
const (
	busyRetries = 8
	maxBusyWait = 5 * time.Second
)

// send sends one request; a non-2xx answer is read into an *Error. A busy
// answer is retried when the body can be sent again.
func (c *Client) send(ctx context.Context, method, path, ctype string, body io.Reader, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		e := readError(resp)
		resp.Body.Close()
		if e.Slug != SlugBusy || attempt == busyRetries || (req.Body != nil && req.GetBody == nil) {
			return nil, e
		}
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
		}
		wait := maxBusyWait
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = min(wait, time.Duration(s)*time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s %s: %w (%w)", method, path, ctx.Err(), e)
		case <-t.C:
		}
	}
}

// readError turns a non-2xx answer into an *Error; a body that is not the
// envelope (a proxy's page) becomes the message under the status's slug.
func readError(resp *http.Response) *Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	if json.Unmarshal(raw, e) != nil || e.Slug == "" {
		e.Slug = defaultSlug(resp.StatusCode)
		e.Message = strings.TrimSpace(string(raw))
		e.Retryable = resp.StatusCode >= 500
	}
	return e
}
