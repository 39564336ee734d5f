package vmimages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// A Source offers the .deb files of locked packages. Sources are tried in
// order for the packages still missing; whatever a source returns is
// checked against the lock's size and SHA-256 before it enters the cache,
// so a source is trusted for availability only, never for content.
type Source interface {
	// String names the source in messages: "apt (this machine's sources)",
	// "directory /srv/debs", "snapshot https://snapshot.debian.org".
	String() string
	// Fetch writes what it has of pkgs into dir (an empty directory of
	// its own) and returns each file by package name. For every package it
	// does not return, why answers in a few words ("not there", "HTTP 404").
	// An error means the source as a whole failed (unreachable, broken);
	// what it says stands for every package asked for.
	Fetch(ctx context.Context, dir string, l *manifests.PackageLock, pkgs []manifests.LockedPackage) (got, why map[string]string, err error)
}

// SourcesEnv names the environment variable with user-given sources: a
// list of directories and http(s) URLs, separated by spaces or commas.
const SourcesEnv = "SEALBENCH_DEB_SOURCES"

// SnapshotEnv overrides the snapshot.debian.org base URL ("off" turns the
// snapshot source off, e.g. on a machine that cannot reach it and should
// not wait for it).
const SnapshotEnv = "SEALBENCH_SNAPSHOT_URL"

// DefaultSnapshotURL is Debian's archive of every version it published.
const DefaultSnapshotURL = "https://snapshot.debian.org"

// ParseSource reads one user-given source: a directory of .debs, or an
// http(s) URL of a plain HTTP tree (a mirror's archive root, or a copy of
// a directory of .debs served over HTTP).
func ParseSource(s string) (Source, error) {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("package source %q is not a usable URL", s)
		}
		return &httpSource{base: strings.TrimRight(u.String(), "/"), client: httpClient()}, nil
	}
	if strings.Contains(s, "://") {
		return nil, fmt.Errorf("package source %q: only directories and http(s) URLs are supported", s)
	}
	fi, err := os.Stat(s)
	if err != nil {
		return nil, fmt.Errorf("package source %q: %w", s, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("package source %q is not a directory (give the directory holding the .debs)", s)
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return nil, err
	}
	return dirSource(abs), nil
}

// Sources returns the sources to fetch from, in the order they are tried
// after the cache: the user's (flags, then SEALBENCH_DEB_SOURCES), which
// are explicit and usually local; this machine's apt sources; and
// snapshot.debian.org, which keeps every version Debian ever published
// (unless SEALBENCH_SNAPSHOT_URL=off).
func Sources(cacheDir string, user []string) ([]Source, error) {
	var all []string
	all = append(all, user...)
	all = append(all, strings.FieldsFunc(os.Getenv(SourcesEnv), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })...)
	var out []Source
	for _, s := range all {
		src, err := ParseSource(s)
		if err != nil {
			return nil, err
		}
		out = append(out, src)
	}
	out = append(out, &aptSource{cacheDir: cacheDir})
	if snap := snapshotURL(); snap != "" {
		out = append(out, &snapshotSource{base: snap, client: httpClient()})
	}
	return out, nil
}

func snapshotURL() string {
	v, set := os.LookupEnv(SnapshotEnv)
	switch {
	case !set || v == "":
		return DefaultSnapshotURL
	case v == "off":
		return ""
	}
	return strings.TrimRight(v, "/")
}

// debName is the file name Debian's pool gives a package.
func debName(p manifests.LockedPackage) string {
	if p.Filename != "" {
		return path.Base(p.Filename)
	}
	v := p.Version
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after // the pool's names leave the epoch out
	}
	return fmt.Sprintf("%s_%s_%s.deb", p.Name, v, p.Arch)
}

// dirSource is a directory of .debs: a copy of another machine's cache
// (files named by SHA-256), an `image export-debs` directory or any flat
// directory (pool file names), or a mirror's tree (pool paths).
type dirSource string

func (d dirSource) String() string { return "directory " + string(d) }

func (d dirSource) Fetch(_ context.Context, dir string, _ *manifests.PackageLock, pkgs []manifests.LockedPackage) (map[string]string, map[string]string, error) {
	got, why := map[string]string{}, map[string]string{}
	for _, p := range pkgs {
		cands := []string{
			filepath.Join(string(d), p.SHA256.Hex+".deb"),
			filepath.Join(string(d), "debs", p.SHA256.Hex+".deb"),
			filepath.Join(string(d), debName(p)),
		}
		if p.Filename != "" {
			cands = append(cands, filepath.Join(string(d), filepath.FromSlash(p.Filename)))
		}
		why[p.Name] = "not there"
		for _, c := range cands {
			if _, err := os.Stat(c); err != nil {
				continue
			}
			if err := checkDeb(c, p); err != nil {
				why[p.Name] = fmt.Sprintf("%s differs from the lock: %v", filepath.Base(c), err)
				continue
			}
			// Copy, so that the cache never shares an inode with a
			// directory the user may change later.
			out := filepath.Join(dir, p.SHA256.Hex+".deb")
			if err := copyFile(c, out); err != nil {
				return nil, nil, fmt.Errorf("copying %s: %w", c, err)
			}
			got[p.Name] = out
			delete(why, p.Name)
			break
		}
	}
	return got, why, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// httpSource is a plain HTTP tree: an archive root with the pool below it
// (a company mirror), or a flat directory of .debs served over HTTP.
type httpSource struct {
	base   string
	client *http.Client
}

func (h *httpSource) String() string { return "URL " + h.base }

func (h *httpSource) Fetch(ctx context.Context, dir string, _ *manifests.PackageLock, pkgs []manifests.LockedPackage) (map[string]string, map[string]string, error) {
	got, why := map[string]string{}, map[string]string{}
	for _, p := range pkgs {
		var cands []string
		if p.Filename != "" {
			cands = append(cands, h.base+"/"+p.Filename)
		}
		cands = append(cands, h.base+"/"+url.PathEscape(debName(p)), h.base+"/"+p.SHA256.Hex+".deb")
		why[p.Name] = "not there"
		for _, u := range cands {
			out, err := download(ctx, h.client, u, dir, p)
			var st statusError
			switch {
			case err == nil:
				got[p.Name] = out
				delete(why, p.Name)
			case errors.As(err, &st):
				why[p.Name] = err.Error()
				continue
			case isNetError(err):
				return nil, nil, err
			default:
				why[p.Name] = err.Error()
				continue
			}
			break
		}
	}
	return got, why, nil
}

// snapshotSource is snapshot.debian.org (or a server with its layout):
// first the package's pool path in the archive as of the lock's time,
// then, where that fails, its machine-readable API, which finds a version
// by name wherever and whenever it was published.
type snapshotSource struct {
	base   string
	client *http.Client
}

func (s *snapshotSource) String() string { return "snapshot " + s.base }

// SnapshotTime formats t as snapshot.debian.org's archive timestamps.
func SnapshotTime(t time.Time) string { return t.UTC().Format("20060102T150405Z") }

func (s *snapshotSource) Fetch(ctx context.Context, dir string, l *manifests.PackageLock, pkgs []manifests.LockedPackage) (map[string]string, map[string]string, error) {
	got, why := map[string]string{}, map[string]string{}
	for _, p := range pkgs {
		var answers []string
		if p.Filename != "" {
			u := fmt.Sprintf("%s/archive/%s/%s/%s", s.base, p.SnapshotArchive(), SnapshotTime(l.Time), p.Filename)
			out, err := download(ctx, s.client, u, dir, p)
			if err == nil {
				got[p.Name] = out
				continue
			}
			if isNetError(err) {
				return nil, nil, err
			}
			answers = append(answers, "by path: "+err.Error())
		}
		out, err := s.byAPI(ctx, dir, p)
		if err == nil {
			got[p.Name] = out
			continue
		}
		if isNetError(err) {
			return nil, nil, err
		}
		why[p.Name] = strings.Join(append(answers, "by name: "+err.Error()), "; ")
	}
	return got, why, nil
}

// snapshotBinfiles is the answer of /mr/binary/NAME/VERSION/binfiles?fileinfo=1.
type snapshotBinfiles struct {
	Result []struct {
		Hash         string `json:"hash"` // SHA-1, the address of /file/HASH
		Architecture string `json:"architecture"`
	} `json:"result"`
	FileInfo map[string][]struct {
		Name string `json:"name"`
		Size int64  `json:"size"`
	} `json:"fileinfo"`
}

func (s *snapshotSource) byAPI(ctx context.Context, dir string, p manifests.LockedPackage) (string, error) {
	u := fmt.Sprintf("%s/mr/binary/%s/%s/binfiles?fileinfo=1", s.base, url.PathEscape(p.Name), url.PathEscape(p.Version))
	b, err := getSmall(ctx, s.client, u)
	if err != nil {
		return "", err
	}
	var bf snapshotBinfiles
	if err := json.Unmarshal(b, &bf); err != nil {
		return "", fmt.Errorf("%s: not the snapshot API's answer: %v", u, err)
	}
	var tried int
	for _, r := range bf.Result {
		if r.Architecture != p.Arch || len(r.Hash) != 40 || strings.Trim(r.Hash, "0123456789abcdef") != "" {
			continue
		}
		tried++
		out, err := download(ctx, s.client, s.base+"/file/"+r.Hash, dir, p)
		if err == nil || isNetError(err) {
			return out, err
		}
	}
	if tried == 0 {
		return "", fmt.Errorf("no %s file of %s=%s", p.Arch, p.Name, p.Version)
	}
	return "", fmt.Errorf("no file of %s=%s matches the lock", p.Name, p.Version)
}

// statusError is an HTTP answer other than 200.
type statusError struct {
	url  string
	code int
}

func (e statusError) Error() string { return fmt.Sprintf("HTTP %d", e.code) }

// netError marks a failure to reach the server at all.
type netError struct{ err error }

func (e netError) Error() string { return "unreachable: " + e.err.Error() }
func (e netError) Unwrap() error { return e.err }

func isNetError(err error) bool {
	var n netError
	return errors.As(err, &n)
}

// httpClient bounds the waits that matter when a server is not there;
// a download itself may take as long as its context allows.
func httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second}).DialContext,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		MaxIdleConnsPerHost:   4,
	}}
}

func get(ctx context.Context, c *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, netError{err}
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, statusError{u, resp.StatusCode}
	}
	return resp, nil
}

// getSmall reads a small answer (an API's JSON), at most 4 MiB of it.
func getSmall(ctx context.Context, c *http.Client, u string) ([]byte, error) {
	resp, err := get(ctx, c, u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 4<<20))
}

// download fetches u into dir as p's file, reading at most one byte more
// than the lock's size, and keeps it only when size and SHA-256 match.
func download(ctx context.Context, c *http.Client, u, dir string, p manifests.LockedPackage) (string, error) {
	resp, err := get(ctx, c, u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	out := filepath.Join(dir, p.SHA256.Hex+".deb")
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, io.LimitReader(resp.Body, p.Size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkDeb(out, p)
	}
	if err != nil {
		os.Remove(out)
		return "", fmt.Errorf("%s: %v", u, err)
	}
	return out, nil
}

// aptSource fetches name=version through apt with this machine's sources
// (private package lists and cache, see apt).
type aptSource struct{ cacheDir string }

func (a *aptSource) String() string { return "apt (this machine's sources)" }

func (s *aptSource) Fetch(ctx context.Context, dir string, l *manifests.PackageLock, pkgs []manifests.LockedPackage) (map[string]string, map[string]string, error) {
	a, err := newApt(s.cacheDir, l.Arch)
	if err != nil {
		return nil, nil, err
	}
	// apt does not fail cleanly on a full disk (it can wait forever), so
	// make sure first that what it will write fits.
	need := int64(0)
	for _, p := range pkgs {
		need += p.Size
	}
	if !a.hasLists() {
		need += listsSize
	}
	if err := checkSpace(s.cacheDir, need); err != nil {
		return nil, nil, err
	}
	if !a.hasLists() {
		if err := a.update(ctx); err != nil {
			return nil, nil, err
		}
	}
	got, why, err := a.downloadAvailable(ctx, dir, pkgs)
	if err != nil || len(why) == 0 {
		return got, why, err
	}
	// The lists may be older than the archive: ask again with fresh ones
	// before saying a version is gone.
	if err := a.update(ctx); err != nil {
		return nil, nil, err
	}
	var rest []manifests.LockedPackage
	for _, p := range pkgs {
		if _, ok := got[p.Name]; !ok {
			rest = append(rest, p)
		}
	}
	more, why, err := a.downloadAvailable(ctx, dir, rest)
	for n, f := range more {
		got[n] = f
	}
	return got, why, err
}
