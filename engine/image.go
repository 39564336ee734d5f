package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/manifests"
)

// Image is the Sandbox image to install: a tar as `docker load` takes it.
type Image struct {
	Tar string           `json:"tar"`
	Ref string           `json:"ref"` // the tag it loads under
	ID  manifests.Digest `json:"id"`  // the image id: its config's digest
	// Lock is the package lock it was built from; Relocked, why that is a
	// fresh lock rather than the committed one, when it is.
	Lock     *manifests.PackageLock `json:"lock,omitempty"`
	Relocked string                 `json:"relocked,omitempty"`
}

// LoadImage installs img into the Engine at endpoint (cli is its client),
// for target of run runID: skipped when the Engine already has img.ID,
// otherwise recorded with rec first, loaded, and checked (the Engine must
// then have img.ID).
//
// The image is recorded only once it may exist: not when the tar cannot be
// opened, nor when the Engine cannot say whether it has the image (it does
// not answer, or refuses us), as nothing can be loaded then. A load that
// fails after the record, when the Engine then says it has no such image,
// made nothing: the entry is retracted (rec's Retract, when it has one), so
// that teardown passes it even when the Engine is gone by then. When the
// Engine cannot say, the entry stays: the image may exist.
func LoadImage(ctx context.Context, cli client.APIClient, rec Recorder, target, endpoint string, img Image) error {
	if err := img.ID.Validate(); err != nil {
		return fmt.Errorf("image to install: %w", err)
	}
	// An image the Engine has already is not the run's to remove: it is
	// recorded, and so torn down, only when this run loads it.
	if _, err := cli.ImageInspect(ctx, img.ID.String()); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("asking %s whether it has the image %s: %w", endpoint, img.ID, err)
	}
	f, err := os.Open(img.Tar)
	if err != nil {
		return fmt.Errorf("opening the Sandbox image: %w", err)
	}
	defer f.Close()
	entry := manifests.LedgerEntry{Target: target, Kind: manifests.ResourceImage, Key: img.ID.String(), Engine: endpoint, Detail: img.Ref}
	if err := rec.Record(entry); err != nil {
		return err
	}
	if err := load(ctx, cli, f, endpoint, img); err != nil {
		if _, ierr := cli.ImageInspect(ctx, img.ID.String()); cerrdefs.IsNotFound(ierr) {
			if r, ok := rec.(Retracter); ok {
				if rerr := r.Retract(entry, "never made: the load failed and "+endpoint+" has no such image"); rerr != nil {
					return fmt.Errorf("%w (and retracting its ledger entry: %v)", err, rerr)
				}
			}
		}
		return err
	}
	return nil
}

// load loads the tar f into the Engine and checks that it then has img.
func load(ctx context.Context, cli client.APIClient, f *os.File, endpoint string, img Image) error {
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("loading %s into %s: %w", img.Tar, endpoint, err)
	}
	defer resp.Body.Close()
	if err := readProgress(resp.Body); err != nil {
		return fmt.Errorf("loading %s into %s: %w", img.Tar, endpoint, err)
	}
	got, err := cli.ImageInspect(ctx, img.ID.String())
	if err != nil {
		return fmt.Errorf("after loading %s, %s has no image %s: the tar is not the image its identity file names (%w)", img.Tar, endpoint, img.ID, err)
	}
	if got.ID != img.ID.String() {
		return fmt.Errorf("after loading, %s answers image %s for %s", endpoint, got.ID, img.ID)
	}
	return nil
}

// PullImage has the Engine at endpoint (cli is its client) pull ref for
// platform (os/arch; empty is the Engine's), and reads its progress to the
// end. Recording the image, and checking what the Engine then holds, are
// the caller's: only it knows whether the pull makes anything.
func PullImage(ctx context.Context, cli client.APIClient, endpoint, ref, platform string) error {
	rc, err := cli.ImagePull(ctx, ref, image.PullOptions{Platform: platform})
	if err != nil {
		return fmt.Errorf("pulling %s into %s: %w", ref, endpoint, err)
	}
	defer rc.Close()
	if err := readProgress(rc); err != nil {
		return fmt.Errorf("pulling %s into %s: %w", ref, endpoint, err)
	}
	return nil
}

// readProgress reads an Engine's JSON progress stream (image load, pull)
// to its end, failing with the first error it carries.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}
