package ociartifact

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Scheme prefixes every reference this package takes, as Helm's and
// Flux's do: oci://REGISTRY/REPOSITORY[:TAG|@DIGEST].
const Scheme = "oci://"

// IsRef says whether s is meant as a registry reference (oci://...)
// rather than a path.
func IsRef(s string) bool { return strings.HasPrefix(s, Scheme) }

// Ref is a parsed oci:// reference.
type Ref struct {
	// Ref is the tag or digest reference, as go-containerregistry names it.
	name.Reference
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool
}

// String is the reference as a user writes it: oci://REGISTRY/REPO:TAG.
func (r Ref) String() string { return Scheme + r.Reference.Name() }

// Digest is this reference's repository at digest d.
func (r Ref) Digest(d string) Ref {
	return Ref{Reference: r.Context().Digest(d), Insecure: r.Insecure}
}

// ParseRef parses oci://REGISTRY/REPOSITORY[:TAG|@sha256:HEX]. The
// registry is never implied: a reference without one is refused rather
// than sent to Docker Hub. insecure allows plain HTTP to a registry that
// is not on loopback (loopback registries get it anyway).
func ParseRef(s string, insecure bool) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Ref{}, fmt.Errorf("%q is not an oci:// reference", s)
	}
	host, repo, ok := strings.Cut(rest, "/")
	if !ok || host == "" || repo == "" {
		return Ref{}, fmt.Errorf("%q: want oci://REGISTRY/REPOSITORY[:TAG|@DIGEST], e.g. oci://localhost:5000/bench/bundle:v1", s)
	}
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return Ref{}, fmt.Errorf("%q: %q is not a registry host (a name with a dot or a port, or localhost)", s, host)
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(rest, opts...)
	if err != nil {
		return Ref{}, fmt.Errorf("%q: %w", s, err)
	}
	return Ref{Reference: r, Insecure: insecure}, nil
}

// Options says how to reach a registry.
type Options struct {
	// Keychain gives credentials; nil is authn.DefaultKeychain
	// (~/.docker/config.json and its credential helpers).
	Keychain authn.Keychain
	// Transport is the HTTP transport under the plain-HTTP guard; nil is
	// remote.DefaultTransport.
	Transport http.RoundTripper
	// Log says what is being done, one line each.
	Log func(string, ...any)
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

func (o Options) remote(r Ref, extra ...remote.Option) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	base := o.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	return append([]remote.Option{
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(&schemeGuard{base: base, insecure: r.Insecure}),
		remote.WithUserAgent("sealbench"),
	}, extra...)
}

// schemeGuard refuses plain HTTP to any host but loopback unless the
// reference was given with insecure: go-containerregistry itself falls
// back to HTTP for private addresses, which would send credentials and
// bundles in the clear.
type schemeGuard struct {
	base     http.RoundTripper
	insecure bool
}

// ErrPlainHTTP: a request would have gone over plain HTTP to a host that
// is not on loopback, without --insecure.
var ErrPlainHTTP = errors.New("plain HTTP refused")

func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.insecure && !Loopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("%w to %s: the registry is not on loopback (pass --insecure to allow it)", ErrPlainHTTP, req.URL.Host)
	}
	return g.base.RoundTrip(req)
}

// Loopback says whether host is this machine's loopback: localhost or a
// loopback address.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// explain wraps a registry error with what was being done and a hint for
// the answers a user can act on.
func explain(what string, r Ref, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s %s: the registry refused the credentials (%d): log in with `docker login %s` (sealbench reads ~/.docker/config.json and its credential helpers): %w",
				what, r, te.StatusCode, r.Context().RegistryStr(), err)
		case http.StatusNotFound:
			return fmt.Errorf("%s %s: not found in the registry (404): %w", what, r, err)
		}
	}
	return fmt.Errorf("%s %s: %w", what, r, err)
}

// progressStep is how large a push must be for progress lines: a line
// at each quarter.
const progressStep = 16 << 20

// progress is a remote option that says, for a large push, how much of
// what has been written, at each quarter.
func (o Options) progress(what string) remote.Option {
	ch := make(chan v1.Update, 64)
	go func() {
		last := int64(-1)
		for u := range ch {
			if u.Total < progressStep || u.Error != nil {
				continue
			}
			if q := u.Complete * 4 / u.Total; q > last {
				last = q
				o.logf("%s: %d of %d MiB written", what, u.Complete>>20, u.Total>>20)
			}
		}
	}()
	return remote.WithProgress(ch)
}
