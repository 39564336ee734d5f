package orchestrate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/vmimages"
)

// TestImageOfCarriesItsLock: the image a run loads carries the lock kept
// beside it (for pins.json), says loudly when that lock is a fresh one,
// and refuses a lock file that is not the one the image records.
func TestImageOfCarriesItsLock(t *testing.T) {
	lock := &manifests.PackageLock{
		SchemaVersion: manifests.PackageLockSchemaVersion, Kind: manifests.PackageLockKind, Name: "sandbox", Arch: "amd64",
		Spec: manifests.PackageSpec{Roots: []string{"dash"}, Exclude: []string{}}, Time: time.Unix(1764400000, 0).UTC(),
		Packages: []manifests.LockedPackage{{Name: "dash", Version: "0.5.12-2", Arch: "amd64", Filename: "pool/main/d/dash/dash_0.5.12-2_amd64.deb", Size: 1, SHA256: manifests.DigestOf([]byte("x"))}},
	}
	lb, err := lock.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, vmimages.SandboxLock), lb, 0o644); err != nil {
		t.Fatal(err)
	}
	info := &vmimages.ImageInfo{Ref: "sealbench/sandbox:build-linux-0123456789ab", ID: manifests.DigestOf([]byte("config")), LockDigest: manifests.DigestOf(lb)}
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }

	img, err := imageOf(dir, info, logf)
	if err != nil {
		t.Fatal(err)
	}
	if img.Lock == nil || img.Lock.Packages[0].Version != "0.5.12-2" || img.Relocked != "" || len(logs) != 0 {
		t.Errorf("committed lock: %+v, relocked %q, logs %q", img.Lock, img.Relocked, logs)
	}

	info.Relock = &vmimages.Relock{Committed: manifests.DigestOf([]byte("committed")), Fresh: info.LockDigest, Missing: []string{"dash=0.5.11-1"},
		Moved: []manifests.PackageChange{{Name: "dash", Old: "0.5.11-1", New: "0.5.12-2"}}, Path: "/cache/locks/x.json"}
	img, err = imageOf(dir, info, logf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(img.Relocked, "dash=0.5.11-1") || !strings.Contains(img.Relocked, "differs from the committed one") {
		t.Errorf("relocked: %q", img.Relocked)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "NOTICE") || !strings.Contains(logs[0], "dash 0.5.11-1 -> 0.5.12-2") {
		t.Errorf("no loud notice: %q", logs)
	}

	info.LockDigest = manifests.DigestOf([]byte("another lock"))
	if _, err := imageOf(dir, info, logf); err == nil || !strings.Contains(err.Error(), "rebuild the image") {
		t.Errorf("a lock file the image does not record: %v", err)
	}
}
