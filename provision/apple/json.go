package apple

import "encoding/json"

// The JSON the `container` tool prints. The shapes are those of
// apple/container's Sources: `container list --format json` encodes
// [PrintableContainer] (Sources/CLI/Container/ContainerList.swift:
// status, configuration, networks), configuration being a
// ContainerConfiguration (Sources/ContainerClient/Core/
// ContainerConfiguration.swift: id, image {reference, descriptor}, mounts,
// publishedSockets {containerPath, hostPath}, labels, platform, resources
// {cpus, memoryInBytes}); `container image list --format json` encodes
// [ImageDescription] (Sources/CLI/Image/ImageList.swift,
// Sources/ContainerClient/Core/ImageDescription.swift: reference,
// descriptor {mediaType, digest, size}). Only the fields read are declared;
// the rest is ignored.

// containerJSON is one entry of `container list --format json`.
type containerJSON struct {
	Status        string `json:"status"` // running, stopped, unknown
	Configuration struct {
		ID    string `json:"id"`
		Image struct {
			Reference  string `json:"reference"`
			Descriptor struct {
				Digest string `json:"digest"`
			} `json:"descriptor"`
		} `json:"image"`
		Labels           map[string]string `json:"labels"`
		Mounts           []mountJSON       `json:"mounts"`
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
}

// mountJSON is a Filesystem: its type is a Swift enum, encoded as an
// object with one key naming the case ({"volume": {"name": ...}},
// {"virtiofs": {}}, {"block": {...}}).
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

// imageJSON is one entry of `container image list --format json`.
type imageJSON struct {
	Reference  string `json:"reference"`
	Descriptor struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	} `json:"descriptor"`
}

// volumeJSON is one entry of `container volume list --format json`
// (Sources/ContainerClient/Core/Volume.swift: name, labels, ...).
type volumeJSON struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}
