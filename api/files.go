package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/textproto"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	gocid "github.com/ipfs/go-cid"

	"github.com/metanode/metanode/store"
)

// RegisterRequest is the body of POST /api/files/register.
type RegisterRequest struct {
	Path string `json:"path"` // relative to the files root, under plugin/
}

// FileInfo is the answer of GET /api/file/{cid}/info (200 even when absent).
type FileInfo struct {
	Exists      bool   `json:"exists"`
	ContentType string `json:"contentType,omitempty"`
	Size        *int64 `json:"size,omitempty"`
	FilePath    string `json:"filePath,omitempty"`
}

// FileTuple is one row of GET /api/files/tuples.
type FileTuple struct {
	HashID    string `json:"hashId"`
	FilePath  string `json:"filePath"`
	SizeByte  int64  `json:"sizeByte"`
	MtimeNano int64  `json:"mtimeNano"`
}

// FileTuplesResponse is the answer of GET /api/files/tuples; Files is
// omitted with ?summary=1.
type FileTuplesResponse struct {
	Files     *[]FileTuple `json:"files,omitempty"`
	Count     int          `json:"count"`
	TotalSize int64        `json:"totalSize"`
}

// pluginRelPath returns the clean form of a path under plugin/: plugins
// may register their own outputs, nothing else. As upstream's
// pluginRelPath: surrounding space and one leading "/" go, a ".." segment
// anywhere is refused, and path.Clean folds "//" and "./"; a backslash or
// NUL is refused too (a Windows separator, or a name no file has).
func pluginRelPath(raw string) (string, error) {
	p := strings.TrimPrefix(strings.TrimSpace(raw), "/")
	switch {
	case p == "":
		return "", badRequest("path is required")
	case strings.ContainsAny(p, "\\\x00"):
		return "", badRequest("path %q contains a backslash or NUL", raw)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", badRequest("path %q must not contain ..", raw)
		}
	}
	clean := path.Clean(p)
	if rest, ok := strings.CutPrefix(clean, "plugin/"); !ok || rest == "" || !filepath.IsLocal(clean) {
		return "", badRequest("path %q must name a file under plugin/, relative to the files root", raw)
	}
	return clean, nil
}

func (s *Server) handleRegisterFile(w http.ResponseWriter, r *http.Request) error {
	var req RegisterRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		return err
	}
	rel, err := pluginRelPath(req.Path)
	if err != nil {
		return err
	}
	if s.cfg.FilesRoot != "" {
		// A symlink under plugin/ must not register a file from elsewhere.
		err := s.linkFree(rel)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist) && s.rootIsEmpty():
			// Only the watcher knows whether this empty root holds
			// indexed files (a share not mounted on it: 503, retry) or
			// is an empty library (the file is missing: 404). Nothing
			// in it can be a symlink.
		default:
			return err
		}
	}
	res, err := s.cfg.Node.RegisterFile(r.Context(), rel)
	if err != nil {
		return notFoundAs(err, SlugUnknownRoot)
	}
	// Upstream answered the relative path (plugins join it with their
	// FILES_PATH or compare it with what they sent); the record's
	// filePath stays absolute.
	res.Path = rel
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	return writeJSON(w, status, res)
}

// linkFree checks that rel (below the files root) names something reached
// through real directories only, following no symlink: a plugin registers
// its own files, not links to files elsewhere. An answer names only rel's
// own names: where a link leads, and what is there, is none of the
// caller's business (a link may lead outside the root). A missing name is
// fs.ErrNotExist; a missing root store.ErrUnavailable, as resolveUnderRoot.
func (s *Server) linkFree(rel string) error {
	root, err := os.OpenRoot(s.cfg.FilesRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: files root %s is missing (moved, deleted or not mounted); retry once it is back",
			store.ErrUnavailable, s.cfg.FilesRoot)
	}
	if err != nil {
		return fmt.Errorf("files root: %w", err)
	}
	cur := root
	defer func() { cur.Close() }()
	names := strings.Split(rel, "/")
	for i, name := range names {
		at := strings.Join(names[:i+1], "/")
		fi, err := cur.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s: %w", at, fs.ErrNotExist)
		case err != nil:
			return fmt.Errorf("%s: %w", at, err) // os.Root names only name
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: %s is a symlink: register the file itself", store.ErrBadPath, at)
		case i == len(names)-1:
			return nil
		case !fi.IsDir():
			return fmt.Errorf("%w: %s is not a directory", store.ErrBadPath, at)
		}
		next, err := cur.OpenRoot(name)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		cur.Close()
		cur = next
	}
	return nil
}

// errOutsideRoot refuses a file that resolves outside the files root.
var errOutsideRoot = errors.New("not under the files root")

// errUnresolvable: a path whose symlinks cannot be resolved for another
// reason than a missing file (a file used as a directory, a symlink loop).
var errUnresolvable = errors.New("cannot be resolved")

// resolveUnderRoot resolves symlinks in p and returns it relative to the
// (resolved) files root; a missing file is fs.ErrNotExist, a missing root
// store.ErrUnavailable (503, retryable), one that lands outside the root a
// 400.
func (s *Server) resolveUnderRoot(p string) (string, error) {
	if s.cfg.FilesRoot == "" {
		return "", fmt.Errorf("%w: no files root configured", store.ErrNotFound)
	}
	root, err := filepath.EvalSymlinks(s.cfg.FilesRoot)
	if errors.Is(err, fs.ErrNotExist) {
		// No file under it is missing: the node cannot look (a share not
		// mounted, the root moved away). Not fs.ErrNotExist, a 404.
		return "", fmt.Errorf("%w: files root %s is missing (moved, deleted or not mounted); retry once it is back",
			store.ErrUnavailable, s.cfg.FilesRoot)
	}
	if err != nil {
		return "", fmt.Errorf("files root: %w", err)
	}
	// The resolver's errors name where links lead, maybe outside the root:
	// the answers name p only.
	real, err := filepath.EvalSymlinks(p)
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%s: %w", p, fs.ErrNotExist) // → 404
	case errors.As(err, &pe):
		return "", fmt.Errorf("%w: %s: %v", errUnresolvable, p, pe.Err)
	case err != nil:
		return "", fmt.Errorf("%w: %s", errUnresolvable, p)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) {
		return "", badRequest("%s is %v", p, errOutsideRoot)
	}
	return rel, nil
}

// rootIsEmpty reports whether the files root is a directory with no entry
// at all (an unmounted mount point looks like that).
func (s *Server) rootIsEmpty() bool {
	f, err := os.Open(s.cfg.FilesRoot)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// openUnderRoot opens the regular file p only if it lies under the files
// root once symlinks are resolved, and not through any. It opens through
// os.Root, so a path swapped for a symlink after the check still cannot
// escape.
func (s *Server) openUnderRoot(p string) (*os.File, os.FileInfo, error) {
	rel, err := s.resolveUnderRoot(p)
	if errors.Is(err, errUnresolvable) {
		return nil, nil, fmt.Errorf("%w: %v", store.ErrNotFound, err) // the file is not there as indexed
	}
	if err != nil {
		return nil, nil, err
	}
	// Never through a link, even one that stays inside the root: the row
	// names the file at its own path (docs/watcher.md), so the resolved
	// path must be that path, and the file opened the one looked at.
	abs, err := filepath.Abs(s.cfg.FilesRoot)
	if err != nil {
		return nil, nil, fmt.Errorf("files root: %w", err)
	}
	if lex, err := filepath.Rel(abs, filepath.Clean(p)); err != nil || lex != rel {
		return nil, nil, fmt.Errorf("%w: %s goes through a symlink", store.ErrNotFound, p)
	}
	root, err := os.OpenRoot(s.cfg.FilesRoot)
	if err != nil {
		return nil, nil, fmt.Errorf("files root: %w", err)
	}
	defer root.Close()
	li, err := root.Lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	// Non-blocking: opening a FIFO swapped in for the file would otherwise
	// wait for a writer; a regular file reads the same either way.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() || !os.SameFile(li, info) {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", store.ErrNotFound, p)
	}
	return f, info, nil
}

// openIndexed opens lf's file only while it is the content the watcher
// hashed: the size and mtime of its row. A file rewritten since is another
// content (the watcher hashes it again once it is quiet), not lf's cid.
func (s *Server) openIndexed(lf store.LocalFile) (*os.File, os.FileInfo, error) {
	f, info, err := s.openUnderRoot(lf.Path)
	if err != nil {
		return nil, nil, err
	}
	if info.Size() != lf.Size || info.ModTime().UnixNano() != lf.MtimeNano {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s changed since it was hashed", store.ErrNotFound, lf.Path)
	}
	return f, info, nil
}

func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) error {
	cid := r.PathValue("cid")
	lf, err := s.localFile(r.Context(), cid)
	if err != nil {
		return missError(cid, cidOnly, err, SlugUnknownCID)
	}
	f, info, err := s.openIndexed(lf)
	if err != nil {
		s.log.Debug("file not served", "cid", cid, "path", lf.Path, "err", err)
		// Never tell a caller more than "no such content" about paths.
		return &Error{Status: http.StatusNotFound, Slug: SlugUnknownCID,
			Message: fmt.Sprintf("no local file for %s", cid), err: err}
	}
	defer f.Close()
	// Media downloads outlive the server's 30 s deadlines.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	if ct := mime.TypeByExtension(filepath.Ext(info.Name())); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	// A Range of zero suffixes only is refused (416); other specs beside
	// them are served (RFC 9110: satisfiable when any spec is).
	rest, dropped := dropZeroSuffixes(r.Header.Get("Range"))
	if dropped && rest != "" {
		r.Header.Set("Range", rest)
	}
	cw := &contentWriter{ResponseWriter: w, size: info.Size(), zeroSuffix: dropped && rest == ""}
	http.ServeContent(cw, r, info.Name(), info.ModTime(), f)
	if cw.failed != 0 { // a 416 or 412: answer it like every other error
		return errorf(cw.failed, "%s", strings.TrimSpace(string(cw.msg)))
	}
	return nil
}

// dropZeroSuffixes takes the range specs "-0" (a suffix of zero bytes;
// "-000" and "- 0" too: parsed as http.ServeContent parses them) out of a
// bytes= Range header. RFC 9110 §14.1.2 makes such a spec unsatisfiable,
// but ServeContent answers it with 206 and "Content-Range: bytes
// <size>-<size-1>/<size>", which is invalid (golang/go#81262; review s9
// ops #6). rest is the header without them (bytes=… , "" when no spec is
// left); dropped says whether there was one.
func dropZeroSuffixes(h string) (rest string, dropped bool) {
	specs, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return h, false
	}
	var keep []string
	for spec := range strings.SplitSeq(specs, ",") {
		if textproto.TrimString(spec) == "" {
			continue // ServeContent skips empty specs too
		}
		start, end, ok := strings.Cut(textproto.TrimString(spec), "-")
		if ok && textproto.TrimString(start) == "" {
			end = textproto.TrimString(end)
			if n, err := strconv.ParseInt(end, 10, 64); err == nil && n == 0 && end != "" && end[0] != '-' {
				dropped = true
				continue
			}
		}
		keep = append(keep, spec)
	}
	if !dropped {
		return h, false
	}
	if len(keep) == 0 {
		return "", true
	}
	return "bytes=" + strings.Join(keep, ","), true
}

// contentWriter passes http.ServeContent's answers through except its
// refusals (416, 412), which it writes as text/plain: those it holds back,
// with their message, so the handler can answer with the error envelope.
// Headers ServeContent set for them (Content-Range: bytes */size) stay. A
// 206 for a Range with a zero suffix is refused the same way, as 416.
type contentWriter struct {
	http.ResponseWriter
	size       int64 // of the file served
	zeroSuffix bool  // the Range header has only "-0" specs (dropZeroSuffixes)
	failed     int   // the refused status, 0 while all is well
	msg        []byte
	msgDone    bool // msg is ours: ServeContent's writes are not a message
}

func (w *contentWriter) WriteHeader(code int) {
	if code == http.StatusPartialContent && w.zeroSuffix {
		// Only here, once ServeContent has honoured the Range: a failed
		// precondition, a 304 or an If-Range that does not match answer
		// as they would without this check.
		code = http.StatusRequestedRangeNotSatisfiable
		h := w.Header()
		h.Set("Content-Range", fmt.Sprintf("bytes */%d", w.size))
		h.Del("Content-Type") // multipart/byteranges for several ranges
		w.msg, w.msgDone = []byte("a range of the last 0 bytes (-0) selects nothing"), true
	}
	if code >= 400 {
		w.failed = code
		w.Header().Del("Content-Length")
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *contentWriter) Write(b []byte) (int, error) {
	if w.failed != 0 {
		if room := 512 - len(w.msg); room > 0 && !w.msgDone {
			w.msg = append(w.msg, b[:min(len(b), room)]...)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom keeps sendfile (ServeContent copies through it).
func (w *contentWriter) ReadFrom(src io.Reader) (int64, error) {
	if w.failed != 0 {
		return io.Copy(io.Discard, src)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(w.ResponseWriter, src)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *contentWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) handleFileInfo(w http.ResponseWriter, r *http.Request) error {
	lf, err := s.localFile(r.Context(), r.PathValue("cid"))
	if err == nil {
		return s.writeFileInfo(w, lf)
	}
	if !isNotFound(err) {
		return err
	}
	return writeJSON(w, http.StatusOK, FileInfo{}) // 200 even when absent (http-api.md)
}

// localFile finds the local file of cid, also in another form of the
// same cid (base58, upper case), as the canonical form the store holds:
// info must never say a false exists:false, and /file serves what info
// says exists. Anything else not found (not a cid at all included) is
// store.ErrNotFound.
func (s *Server) localFile(ctx context.Context, cid string) (store.LocalFile, error) {
	lf, err := s.cfg.Store.LocalFileForCID(ctx, cid)
	if err == nil || !isNotFound(err) {
		return lf, err
	}
	if c, derr := gocid.Decode(cid); derr == nil {
		if canon := c.String(); canon != cid {
			return s.cfg.Store.LocalFileForCID(ctx, canon)
		}
	}
	return lf, err
}

func (s *Server) writeFileInfo(w http.ResponseWriter, lf store.LocalFile) error {
	f, info, err := s.openIndexed(lf)
	if err != nil {
		return writeJSON(w, http.StatusOK, FileInfo{})
	}
	f.Close()
	ct := mime.TypeByExtension(filepath.Ext(info.Name()))
	if ct == "" {
		ct = "application/octet-stream"
	}
	size := info.Size()
	return writeJSON(w, http.StatusOK, FileInfo{Exists: true, ContentType: ct, Size: &size, FilePath: lf.Path})
}

func (s *Server) handleFileTuples(w http.ResponseWriter, r *http.Request) error {
	tuples, total, err := s.cfg.Store.FileTuples(r.Context())
	if err != nil {
		return err
	}
	out := FileTuplesResponse{Count: len(tuples), TotalSize: total}
	switch r.URL.Query().Get("summary") {
	case "", "0", "false":
		files := make([]FileTuple, len(tuples))
		for i, t := range tuples {
			files[i] = FileTuple{HashID: t.RID, FilePath: t.FilePath, SizeByte: t.SizeByte, MtimeNano: t.MtimeNano}
		}
		out.Files = &files
	}
	return writeJSON(w, http.StatusOK, out)
}
