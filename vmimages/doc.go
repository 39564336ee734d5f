// Package vmimages builds the images every target runs, from pinned Debian
// packages, reproducibly: the Sandbox image (a small root filesystem plus
// the sealed bundle at /opt/sealbench, as a `docker save` tar and an OCI
// layout) and, for VM targets, bootable disk images.
//
// # Pinned packages
//
// A lock file (manifests.PackageLock) lists the exact Debian packages with
// their versions and SHA-256. `sealbench image lock` resolves it through apt,
// as the machine configures apt (its own sources, never a hard-coded
// mirror), in a private apt state directory so the host's package state
// neither changes nor matters. Building never resolves a version: it fetches
// exactly name=version through apt, checks the SHA-256 against the lock, and
// caches the .deb by hash.
//
// # Reproducible
//
// Packages are unpacked (dpkg-deb --fsys-tarfile; no maintainer script ever
// runs on the host) into one deterministic layer: sorted entries, uid/gid 0
// names dropped, every mtime the lock's time. The bundle layer carries the
// bundle's own source time. Building twice, on two machines, gives the same
// image digest.
package vmimages
