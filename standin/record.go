//go:build linux

package standin

import (
	"time"

	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"

	"github.com/sealbench/sealbench/manifests"
)

// imageRecord is what the store keeps about one loaded image, in
// images/<hex>/image.json beside the image's config blob.
type imageRecord struct {
	ID       manifests.Digest   `json:"id"` // the config blob's digest, as Docker names images
	RepoTags []string           `json:"repoTags"`
	DiffIDs  []manifests.Digest `json:"diffIds"` // bottom layer first
	Size     int64              `json:"size"`    // unpacked bytes of all layers
	Loaded   time.Time          `json:"loaded"`

	config dockerspec.DockerOCIImage
}
