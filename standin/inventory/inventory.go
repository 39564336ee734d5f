// Package inventory reads what a stand-in's state directory holds, and what
// of the stand-in is still alive on this host, without linking the server:
// the host-side audit and `standin inventory` use it. Standard library (and
// internal/mountinfo) only, so it builds on every host the audit runs on.
package inventory

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/sealbench/sealbench/internal/mountinfo"
)

// Inventory is what a stand-in's state directory holds, and what of the
// stand-in is still alive on this host, for the audit.
type Inventory struct {
	StateDir string `json:"stateDir"`
	// Images and Layers are kept between runs on purpose.
	Images []Image  `json:"images"`
	Layers []string `json:"layers"` // diff IDs
	// Everything below must be empty once the stand-in has stopped.
	Containers []string `json:"containers"` // directories under containers/
	Temporary  []string `json:"temporary"`  // entries under tmp/
	Mounts     []string `json:"mounts"`     // mount points under StateDir in this mount namespace
	Processes  []int    `json:"processes"`  // Sandbox inits serving StateDir
	LockHeld   bool     `json:"lockHeld"`   // a stand-in holds the state lock: it is running
	Unknown    []string `json:"unknown"`    // anything else in StateDir
}

// Image is one stored image.
type Image struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

// Read lists what the state directory dir holds, the mounts under
// it, and the Sandbox inits still running for it. It only reads.
func Read(dir string) (*Inventory, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{StateDir: dir}
	top, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing state directory %q: %w", dir, err)
	}
	for _, e := range top {
		p := filepath.Join(dir, e.Name())
		switch e.Name() {
		case "images":
			ents, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("listing %q: %w", p, err)
			}
			for _, im := range ents {
				img := Image{ID: "sha256:" + im.Name()}
				// The stand-in's image.json; only the tags matter here.
				var rec struct {
					RepoTags []string `json:"repoTags"`
				}
				if b, err := os.ReadFile(filepath.Join(p, im.Name(), "image.json")); err == nil {
					if json.Unmarshal(b, &rec) == nil {
						img.Tags = rec.RepoTags
					}
				}
				inv.Images = append(inv.Images, img)
			}
		case "layers":
			names, err := dirNames(p)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				inv.Layers = append(inv.Layers, "sha256:"+n)
			}
		case "containers":
			if inv.Containers, err = dirNames(p); err != nil {
				return nil, err
			}
		case "tmp":
			if inv.Temporary, err = dirNames(p); err != nil {
				return nil, err
			}
		case "engine-id":
		case "lock":
			inv.LockHeld = lockHeld(p)
		default:
			inv.Unknown = append(inv.Unknown, e.Name())
		}
	}
	if inv.Mounts, err = mountsUnder(dir); err != nil {
		return nil, err
	}
	inv.Processes = initsFor(dir)
	return inv, nil
}

// Leftovers names what should not be there once the stand-in has
// stopped; an empty answer means a clean state directory.
func (inv *Inventory) Leftovers() []string {
	var out []string
	for _, c := range inv.Containers {
		out = append(out, "container directory "+c)
	}
	for _, t := range inv.Temporary {
		out = append(out, "temporary file "+t)
	}
	for _, m := range inv.Mounts {
		out = append(out, "mount "+m)
	}
	for _, p := range inv.Processes {
		out = append(out, "sandbox init process "+strconv.Itoa(p))
	}
	if inv.LockHeld {
		out = append(out, "state lock held: a stand-in is running on "+inv.StateDir)
	}
	for _, u := range inv.Unknown {
		out = append(out, "unexpected entry "+u)
	}
	return out
}

func dirNames(p string) ([]string, error) {
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", p, err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

// mountsUnder lists the mount points at or below dir, from this process's
// view (/proc/self/mountinfo). The stand-in mounts only inside Sandboxes'
// own mount namespaces, so in the host's there should be none.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := mountinfo.Under(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		out = append(out, m.Point)
	}
	sort.Strings(out)
	return out, nil
}

// initsFor finds Sandbox inits whose root lies under dir: each carries its
// root's host path as its second argument.
func initsFor(dir string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 2 && args[0] == "standin-sandbox-init" && strings.HasPrefix(args[1], dir+"/") {
			out = append(out, pid)
		}
	}
	return out
}

// lockHeld reports whether a stand-in holds the state lock at p.
func lockHeld(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
