//go:build linux

package standin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/storage"

	"github.com/sealbench/sealbench/internal/engineapi"
	"github.com/sealbench/sealbench/manifests"
)

// ImageLoad stores the images of a `docker save` or OCI layout tar.
func (s *Server) ImageLoad(w http.ResponseWriter, r *http.Request) {
	loaded, err := s.images.load(r.Body)
	if errors.Is(err, ErrInvalidTag) {
		// As dockerd: 200, and the error as the stream's last line
		// (its message without "invalid tag: " where the grammar
		// refused the name).
		msg := strings.TrimPrefix(err.Error(), ErrInvalidTag.Error()+": ")
		engineapi.WriteJSON(w, http.StatusOK, map[string]any{"errorDetail": map[string]string{"message": msg}, "error": msg})
		return
	}
	if errors.Is(err, ErrUnsafeLayer) {
		err = fmt.Errorf("%w: %w", ErrBadInput, err) // the tar's fault: 400
	}
	if err != nil {
		engineapi.Fail(w, fmt.Errorf("loading image: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, l := range loaded {
		if len(l.Tags) == 0 {
			enc.Encode(map[string]string{"stream": "Loaded image ID: " + l.ID.String() + "\n"})
		}
		for _, t := range l.Tags {
			enc.Encode(map[string]string{"stream": "Loaded image: " + t + "\n"})
		}
	}
}

func created(rec *imageRecord) time.Time {
	if rec.config.Created != nil {
		return *rec.config.Created
	}
	return rec.Loaded
}

// ImageList lists the images, filtered by reference, label or dangling.
func (s *Server) ImageList(_ context.Context, filter string) (any, error) {
	args, err := filters.FromJSON(filter)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if err := args.Validate(map[string]bool{"reference": true, "label": true, "dangling": true}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	users := s.imageUsers()
	out := []image.Summary{}
	for _, rec := range s.images.list() {
		if args.Contains("label") && !args.MatchKVList("label", rec.config.Config.Labels) {
			continue
		}
		if args.Contains("dangling") && args.ExactMatch("dangling", "true") != (len(rec.RepoTags) == 0) {
			continue
		}
		if args.Contains("reference") {
			ok := false
			for _, t := range rec.RepoTags {
				if args.Match("reference", t) {
					ok = true
				}
			}
			if !ok {
				continue
			}
		}
		tags := rec.RepoTags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, image.Summary{
			ID: rec.ID.String(), RepoTags: tags, RepoDigests: []string{}, Created: created(rec).Unix(),
			Size: rec.Size, Labels: rec.config.Config.Labels, Containers: int64(users[rec.ID]),
		})
	}
	return out, nil
}

// imageUsers counts the containers using each image.
func (s *Server) imageUsers() map[manifests.Digest]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[manifests.Digest]int{}
	for _, c := range s.containers {
		n[c.image.ID]++
	}
	return n
}

// ImageInspect is the image name names: a tag, or an id or a unique
// prefix of one.
func (s *Server) ImageInspect(_ context.Context, name string) (any, error) {
	rec, err := s.images.resolve(name)
	if err != nil {
		return nil, err
	}
	cfg := rec.config
	layers := make([]string, len(rec.DiffIDs))
	for i, d := range rec.DiffIDs {
		layers[i] = d.String()
	}
	tags := rec.RepoTags
	if tags == nil {
		tags = []string{}
	}
	resp := image.InspectResponse{
		ID: rec.ID.String(), RepoTags: tags, RepoDigests: []string{}, Created: created(rec).Format(time.RFC3339Nano),
		Config: &cfg.Config, Architecture: cfg.Architecture, Variant: cfg.Variant, Os: cfg.OS, OsVersion: cfg.OSVersion,
		Author: cfg.Author, Size: rec.Size,
		GraphDriver: storage.DriverData{Name: "overlay", Data: map[string]string{}},
		RootFS:      image.RootFS{Type: "layers", Layers: layers},
		Metadata:    image.Metadata{LastTagTime: rec.Loaded},
	}
	return resp, nil
}

// ImageDelete untags name; when name is an id, or its last tag goes, the
// image is deleted, unless a container uses it and force is not set.
func (s *Server) ImageDelete(_ context.Context, name string, force bool) (any, error) {
	used := s.imageUsers()
	res, err := s.images.remove(name, force, func(d manifests.Digest) bool { return used[d] > 0 })
	if err != nil {
		return nil, fmt.Errorf("removing image %s: %w", name, err)
	}
	out := make([]image.DeleteResponse, 0, len(res))
	for _, d := range res {
		out = append(out, image.DeleteResponse{Untagged: d.Untagged, Deleted: d.Deleted})
	}
	return out, nil
}

// imageConfig is the container config an image carries.
func imageConfig(rec *imageRecord) container.Config {
	c := rec.config.Config
	return container.Config{
		Env: c.Env, Cmd: c.Cmd, Entrypoint: c.Entrypoint, WorkingDir: c.WorkingDir, User: c.User,
		Labels: c.Labels, StopSignal: c.StopSignal,
	}
}
