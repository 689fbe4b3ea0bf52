package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/metanode/metanode/store"
)

// claimFlags are the flags that describe one claim to sign.
type claimFlags struct {
	signer, cid, key string
	value, cipherB64 *string // nil when not given ("" is a valid value)
	retract          bool
	ts               *uint64 // nil when not given: now (0 is a valid timestamp)
}

func addClaimFlags(fl *flag.FlagSet) *claimFlags {
	cf := &claimFlags{}
	fl.StringVar(&cf.signer, "signer", "", "signer key file (from 'metanode keygen')")
	fl.StringVar(&cf.cid, "cid", "", "content id the claim is about")
	fl.StringVar(&cf.key, "key", "", "field name, e.g. title")
	fl.Func("value", "text value", func(s string) error { cf.value = &s; return nil })
	fl.BoolVar(&cf.retract, "retract", false, "a retraction (withdraw this signer's value)")
	fl.Func("cipher-b64", "ciphertext value, standard base64", func(s string) error { cf.cipherB64 = &s; return nil })
	fl.Func("ts", "timestamp in milliseconds since 1970, signed as given, 0 included (default now)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return errors.New("want milliseconds since 1970 as a non-negative integer")
		}
		cf.ts = &v
		return nil
	})
	return cf
}

// given reports whether any claim flag was set.
func (cf *claimFlags) given() bool {
	return cf.signer != "" || cf.cid != "" || cf.key != "" || cf.value != nil || cf.retract || cf.cipherB64 != nil || cf.ts != nil
}

// sign builds, signs and checks the claim the flags describe.
func (cf *claimFlags) sign(cmd string) (store.Claim, error) {
	switch {
	case cf.signer == "":
		return store.Claim{}, usagef(cmd, "--signer is required")
	case cf.cid == "":
		return store.Claim{}, usagef(cmd, "--cid is required")
	case cf.key == "":
		return store.Claim{}, usagef(cmd, "--key is required")
	}
	n := 0
	for _, b := range []bool{cf.value != nil, cf.retract, cf.cipherB64 != nil} {
		if b {
			n++
		}
	}
	if n != 1 {
		return store.Claim{}, usagef(cmd, "give exactly one of --value, --retract or --cipher-b64")
	}
	signer, err := store.LoadSigner(cf.signer)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return store.Claim{}, fmt.Errorf("--signer: %w; make a key with 'metanode keygen --out %s'", err, cf.signer)
	case err != nil:
		// keygen refuses to overwrite a file: point at the right file instead.
		return store.Claim{}, fmt.Errorf("--signer: %w; give the key file 'metanode keygen --out FILE' wrote", err)
	}
	ts := uint64(time.Now().UnixMilli())
	if cf.ts != nil {
		ts = *cf.ts
	}
	var c store.Claim
	switch {
	case cf.value != nil:
		c = signer.Text(cf.cid, cf.key, *cf.value, ts)
	case cf.retract:
		c = signer.Retraction(cf.cid, cf.key, ts)
	default:
		raw, err := base64.StdEncoding.DecodeString(*cf.cipherB64)
		if err != nil {
			return store.Claim{}, usagef(cmd, "--cipher-b64 is not standard base64")
		}
		c = signer.Cipher(cf.cid, cf.key, raw, ts)
	}
	if err := c.Check(time.Now(), store.DefaultMaxSkew); err != nil {
		flag, hint := cf.blame(err)
		return store.Claim{}, usagef(cmd, "%s: %v; %s", flag, err, hint)
	}
	return c, nil
}

// blame names the flag whose value makes a node reject the claim, and what
// to give instead: the claim comes from flags only, so a rejection is a bad
// flag value (exit 2), like a bad CID given to get.
func (cf *claimFlags) blame(err error) (flag, hint string) {
	value := "--value"
	if cf.cipherB64 != nil {
		value = "--cipher-b64"
	}
	switch {
	case errors.Is(err, store.ErrBadCID):
		return "--cid", "give a content id in its canonical CIDv1 form (bafk…, baga…)"
	case errors.Is(err, store.ErrFutureTimestamp):
		return "--ts", "give milliseconds since 1970 no later than now, or leave --ts out"
	case errors.Is(err, store.ErrTooLarge):
		return value, fmt.Sprintf("give at most %d bytes", store.MaxValueBytes)
	case errors.Is(err, store.ErrBadValue):
		if store.IsLinkKey(cf.key) {
			return value, "a cids/<cid> link takes --value true or --retract"
		}
		return value, "give valid UTF-8 text, or --cipher-b64 for bytes"
	case errors.Is(err, store.ErrDeprecatedField), errors.Is(err, store.ErrReservedKey):
		return "--key", "choose another --key"
	case errors.Is(err, store.ErrBadKey):
		return "--key", "give a field path such as title or cast/0/name (segments joined by /)"
	}
	return "--signer", "give the key file 'metanode keygen --out FILE' wrote"
}

func (c *cli) claim(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("claim", "want a subcommand: sign or put")
	}
	switch args[0] {
	case "sign":
		return inSub("claim sign", c.claimSign(args[1:]))
	case "put":
		return inSub("claim put", c.claimPut(ctx, args[1:]))
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, "Usage: metanode claim sign|put [flags]\n\n  sign  print a signed claim as JSON\n  put   sign and post claims to a node (or post claim JSON lines from stdin)\n")
		return errHelp
	}
	return usagef("claim", "unknown subcommand %q: want sign or put", args[0])
}

func (c *cli) claimSign(args []string) error {
	fl := c.flagSet("claim sign", "claim sign --signer FILE --cid C --key K (--value V | --retract | --cipher-b64 B) [--ts MS]",
		"Prints the signed claim as JSON (one line), ready for POST /api/claims or 'metanode claim put -'.")
	cf := addClaimFlags(fl)
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	cl, err := cf.sign("claim sign")
	if err != nil {
		return err
	}
	b, err := cl.MarshalJSON()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s\n", b)
	return nil
}

// maxPutBatch bounds one POST (the API takes at most 10,000 claims, 16 MiB).
const maxPutBatch = 1000

// readClaimLines reads claim JSON, one per line (blank lines skipped), and
// calls fn with batches of at most maxPutBatch. A malformed line goes to bad
// and the rest are still read: claims stand alone, as the node's answer for
// each does.
func readClaimLines(r io.Reader, fn func([]store.Claim) error, bad func(line int, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*store.MaxWireBytes)
	var batch []store.Claim
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var cl store.Claim
		if err := cl.UnmarshalJSON(b); err != nil {
			bad(line, err)
			continue
		}
		batch = append(batch, cl)
		if len(batch) == maxPutBatch {
			if err := fn(batch); err != nil {
				return err
			}
			batch = nil
		}
	}
	if len(batch) > 0 {
		if err := fn(batch); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		// A line too long to read ends the input: the lines before it
		// were posted.
		return fmt.Errorf("stdin line %d: %w; the lines before it were posted", line+1, err)
	}
	return nil
}

// stdinPiped reports whether r is something other than a terminal.
func stdinPiped(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return r != nil
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice == 0
}
