// Package bundle seals sealbench's parts into a bundle and verifies bundles.
//
// A bundle is a directory named build-linux-<12 hex of the manifest's
// SHA-256> holding the binaries every target runs (bin/<os>-<arch>/<name>),
// the cell bodies (cells/), manifest.json (every file with its size, mode and
// SHA-256, and the source identity), manifest.sig (a detached signature of
// the manifest) and SHA256SUMS (for `sha256sum -c` inside targets); and a
// deterministic tar of that directory.
//
// # Reproducible
//
// Seal builds with CGO_ENABLED=0, -trimpath, -buildvcs=false and an empty
// build id, sets every mtime to SOURCE_DATE_EPOCH or the commit time, and
// writes sorted tars with uid/gid 0, so that the same commit sealed twice,
// with separate build caches or on two machines with the same Go, gives a
// byte-identical bundle with the same name.
//
// # Verified
//
// Verify checks the signature first and trusts nothing in the manifest
// before that; then every file: present, regular, same size, mode and
// SHA-256, reading no further than the declared size; no extra files, no
// symlinks, devices or paths that leave the bundle.
//
// Signing itself lives in bundle/sign, which the binaries that ship in a
// bundle do not link: this package takes a SignatureVerifier.
package bundle
