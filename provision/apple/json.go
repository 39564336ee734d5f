package apple

import "encoding/json"

// The JSON the `container` tool prints, as apple/container 1.0.0 to 1.2.2
// encode it (read at the tags 1.0.0 and 1.2.2; the files below did not
// change between them). Every list goes through Output.render
// (Sources/ContainerCommands/OutputRendering.swift: a top-level array,
// keys sorted, dates ISO 8601). Only the fields read are declared; the
// rest is ignored.
//
// Before 1.0.0 the shapes were others (`status` a string, images as
// {reference, descriptor}): MinVersion is 1.0.0 for that reason.

// containerJSON is one entry of `container list --all --format json`: a
// ManagedContainer (Sources/ContainerResource/Container/
// ManagedContainer.swift encodes id, configuration and status), its
// configuration a ContainerConfiguration
// (Sources/ContainerResource/Container/ContainerConfiguration.swift) and
// its status a ContainerStatus
// (Sources/ContainerResource/Container/ContainerStatus.swift: state,
// networks, startedDate).
type containerJSON struct {
	ID            string `json:"id"`
	Configuration struct {
		ID    string `json:"id"`
		Image struct {
			Reference  string `json:"reference"`
			Descriptor struct {
				Digest string `json:"digest"`
			} `json:"descriptor"`
		} `json:"image"`
		Labels map[string]string `json:"labels"`
		Mounts []mountJSON       `json:"mounts"`
		// PublishedSockets' paths are plain absolute paths since 1.0.0
		// (Sources/ContainerResource/Container/PublishSocket.swift; file://
		// URLs before).
		PublishedSockets []struct {
			ContainerPath string `json:"containerPath"`
			HostPath      string `json:"hostPath"`
		} `json:"publishedSockets"`
		Resources struct {
			CPUs          int    `json:"cpus"`
			MemoryInBytes uint64 `json:"memoryInBytes"`
		} `json:"resources"`
		Platform struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	} `json:"configuration"`
	Status struct {
		// State is a RuntimeStatus
		// (Sources/ContainerResource/Container/RuntimeStatus.swift):
		// unknown, stopped, running, stopping.
		State string `json:"state"`
	} `json:"status"`
}

// state is the container's RuntimeStatus.
func (c *containerJSON) state() string { return c.Status.State }

// mountJSON is a Filesystem
// (Sources/ContainerResource/Container/Filesystem.swift): its type is a
// Swift enum with associated values, encoded as an object with one key
// naming the case ({"volume": {"name": ..., "format": ..., "cache": ...,
// "sync": ...}}, {"virtiofs": {}}, {"block": {...}}, {"tmpfs": {}}).
type mountJSON struct {
	Type        map[string]json.RawMessage `json:"type"`
	Source      string                     `json:"source"`
	Destination string                     `json:"destination"`
}

// volume returns the name of the volume the mount is, if it is one.
func (m mountJSON) volume() string {
	raw, ok := m.Type["volume"]
	if !ok {
		return ""
	}
	var v struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v.Name
}

// imageJSON is one entry of `container image list --format json`: an
// ImageResource (Sources/ContainerResource/Image/ImageResource.swift
// encodes id, the digest's hex; configuration {creationDate, name,
// descriptor}; variants), name being the reference the image was stored
// under (Sources/ContainerCommands/Image/ImageList.swift).
type imageJSON struct {
	ID            string `json:"id"`
	Configuration struct {
		Name       string `json:"name"`
		Descriptor struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
			Size      int64  `json:"size"`
		} `json:"descriptor"`
	} `json:"configuration"`
}

// volumeJSON is one entry of `container volume list --format json`: a
// VolumeResource (Sources/ContainerResource/Volume/VolumeResource.swift
// encodes id and configuration), the configuration a VolumeConfiguration
// (Sources/ContainerResource/Volume/VolumeConfiguration.swift: name,
// driver, format, source, labels, options, sizeInBytes, creationDate).
type volumeJSON struct {
	ID            string `json:"id"`
	Configuration struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"configuration"`
}

// anonymousLabel marks an anonymous volume (VolumeConfiguration.
// anonymousLabel): `-v /path` makes one, named by a lowercase UUID, and
// nothing deletes it with its container.
const anonymousLabel = "com.apple.container.resource.anonymous"

func (v *volumeJSON) name() string { return v.Configuration.Name }

func (v *volumeJSON) anonymous() bool {
	_, ok := v.Configuration.Labels[anonymousLabel]
	return ok
}
