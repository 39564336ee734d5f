// Package ociartifact moves sealed bundles through OCI registries: Push
// publishes a verified bundle as an OCI artifact, with its signature and its
// Sigstore bundle attached as referrers and its Sandbox image beside it;
// Pull fetches one by digest into a cache and lays the bundle directory out
// again, for the caller to verify exactly as a local bundle.
//
// # The artifact
//
// An OCI image manifest with artifactType application/vnd.sealbench.bundle.v1
// and the empty config ({}): one layer per file of the bundle, the file's
// bytes uncompressed, its path in the org.opencontainers.image.title
// annotation. So a layer's digest is the SHA-256 the signed manifest
// records for that file, a file unchanged between two bundles (a cell body,
// a binary whose code did not change) is one blob in the registry, and
// a generic client (oras) sees each file under its own name. The
// Sandbox image's package lock is one more layer. Annotations name the
// bundle, its manifest's digest and the Sandbox image, pushed into the same
// repository and named by digest.
//
// # Referrers
//
// manifest.sig and <bundle>.sigstore.json are attached as OCI 1.1
// referrers (manifests whose subject is the artifact). Registries without
// the referrers API (distribution 2.8 among them) get the referrers tag
// schema as well: an index tagged sha256-<hex of the artifact's digest>,
// which is where cosign, oras and go-containerregistry look next.
//
// # Trust
//
// A registry is availability, not integrity: nothing pulled is trusted
// until the bundle verifies with the key, as a local one does. Digests
// are checked as blobs are read, and a tag is resolved once; the digest
// is what is used and recorded from then on.
package ociartifact
