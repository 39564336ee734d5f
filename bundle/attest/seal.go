package attest

import (
	"fmt"
	"strings"
	"time"

	provenance "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sealbench/sealbench/manifests"
)

// Sealed is what a bundle's provenance attests.
type Sealed struct {
	Name     string // build-linux-<hash>
	Manifest *manifests.BundleManifest
	// Meta are the digests of the bundle's own files that its manifest
	// does not list: manifest.json, manifest.sig and SHA256SUMS.
	Meta map[string]manifests.Digest
	Tar  manifests.Digest
	// Image is the Sandbox image built with the bundle; nil when none was.
	Image *Image
	// Version is the sealbench that sealed.
	Version    string
	Start, End time.Time
}

// Image is a Sandbox image, as a bundle's provenance names it.
type Image struct {
	Ref    string           // sealbench/sandbox:build-linux-<hash>
	Config manifests.Digest // the image id: its config's digest
	Arch   string
	// Lock is the Debian package lock it was built from: a name (the
	// committed lock's path in the source tree, or the fresh lock's file)
	// and its digest; Relocked says why it is not the committed lock.
	Lock       string
	LockDigest manifests.Digest
	Relocked   string
}

// BundleFiles are the digests of every file of a bundle: the manifest's
// entries and meta (manifest.json, manifest.sig, SHA256SUMS), by their
// paths in the bundle.
func BundleFiles(m *manifests.BundleManifest, meta map[string]manifests.Digest) map[string]manifests.Digest {
	out := make(map[string]manifests.Digest, len(m.Files)+len(meta))
	for _, f := range m.Files {
		out[f.Path] = f.Digest
	}
	for name, d := range meta {
		out[name] = d
	}
	return out
}

// TarSubject is the name of a bundle's tar among its provenance's subjects.
func TarSubject(bundleName string) string { return bundleName + ".tar" }

// SealStatement is the SLSA provenance v1 of a sealed bundle. Subjects:
// every file of the bundle by its path, the tar as <name>.tar, and the
// Sandbox image's config under the image's reference.
func SealStatement(s Sealed) (*intoto.Statement, error) {
	files := BundleFiles(s.Manifest, s.Meta)
	var subjects []*intoto.ResourceDescriptor
	for _, name := range sortedKeys(files) {
		subjects = append(subjects, subject(name, files[name]))
	}
	subjects = append(subjects, subject(TarSubject(s.Name), s.Tar))
	if s.Image != nil {
		subjects = append(subjects, subject(s.Image.Ref, s.Image.Config))
	}

	src := s.Manifest.Source
	ext, err := toStruct(map[string]any{
		"source":    map[string]any{"module": src.Module, "commit": src.Commit, "dirty": src.Dirty, "version": src.Version},
		"platforms": src.Platforms,
		"image":     imageParams(s.Image),
	})
	if err != nil {
		return nil, err
	}
	internal, err := toStruct(map[string]any{
		"goVersion":       src.GoVersion,
		"buildFlags":      src.BuildFlags,
		"buildEnv":        src.BuildEnv,
		"sourceDateEpoch": rfc3339(src.Time),
	})
	if err != nil {
		return nil, err
	}
	var deps []*intoto.ResourceDescriptor
	if src.Commit != "" {
		ann, err := structpb.NewStruct(map[string]any{"dirty": src.Dirty})
		if err != nil {
			return nil, err
		}
		deps = append(deps, &intoto.ResourceDescriptor{
			Uri: "git+https://" + src.Module, Digest: map[string]string{"gitCommit": src.Commit}, Annotations: ann,
		})
	}
	if s.Image != nil && !s.Image.LockDigest.IsZero() {
		ann := map[string]any{"arch": s.Image.Arch, "purpose": "Debian package lock of the Sandbox image"}
		if s.Image.Relocked != "" {
			ann["relocked"] = s.Image.Relocked
		}
		a, err := structpb.NewStruct(ann)
		if err != nil {
			return nil, err
		}
		deps = append(deps, &intoto.ResourceDescriptor{
			Name: s.Image.Lock, Digest: map[string]string{s.Image.LockDigest.Algorithm: s.Image.LockDigest.Hex}, Annotations: a,
		})
	}
	prov := &provenance.Provenance{
		BuildDefinition: &provenance.BuildDefinition{
			BuildType: BuildType, ExternalParameters: ext, InternalParameters: internal, ResolvedDependencies: deps,
		},
		RunDetails: &provenance.RunDetails{
			Builder: &provenance.Builder{Id: BuilderID, Version: map[string]string{"sealbench": s.Version, "go": src.GoVersion}},
			Metadata: &provenance.BuildMetadata{
				InvocationId: s.Name,
				StartedOn:    timestamppb.New(s.Start),
				FinishedOn:   timestamppb.New(s.End),
			},
		},
	}
	if err := prov.Validate(); err != nil {
		return nil, fmt.Errorf("making the provenance (a bug): %w", err)
	}
	b, err := protojson.Marshal(prov)
	if err != nil {
		return nil, err
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(b, pred); err != nil {
		return nil, err
	}
	return statement(SLSAProvenanceV1, subjects, pred)
}

func imageParams(img *Image) any {
	if img == nil {
		return nil
	}
	return map[string]any{"ref": img.Ref, "arch": img.Arch}
}

// SealCheck is what CheckSeal found.
type SealCheck struct {
	Subjects int `json:"subjects"`
	Checked  int `json:"checked"`
	// Unchecked are the subjects nothing here could be compared with: the
	// tar when it is not at hand, the Sandbox image.
	Unchecked []string  `json:"unchecked,omitempty"`
	Problems  []Problem `json:"problems,omitempty"`
	// Image is the Sandbox image the provenance names (its reference and
	// config digest, the image id), for a caller that has an image to
	// compare with it; nil when it names none.
	Image *ImageSubject `json:"image,omitempty"`
}

// ImageSubject is the Sandbox image among a provenance's subjects.
type ImageSubject struct {
	Ref    string           `json:"ref"`
	Config manifests.Digest `json:"config"`
}

// CheckSeal compares a bundle's verified provenance with what is here:
// files, every file of the bundle (BundleFiles of the verified manifest),
// which must be exactly the subjects that are files; tar, the tar's digest
// when it is at hand (nil otherwise). The image subject is listed as
// unchecked.
func CheckSeal(st *intoto.Statement, bundleName string, files map[string]manifests.Digest, tar *manifests.Digest) SealCheck {
	var c SealCheck
	if st.GetPredicateType() != SLSAProvenanceV1 {
		c.Problems = append(c.Problems, Problem{"predicateType", fmt.Sprintf("is %q, not SLSA provenance v1", st.GetPredicateType())})
	}
	signed, problems := Subjects(st)
	c.Problems = append(c.Problems, problems...)
	c.Subjects = len(st.GetSubject())
	signedFiles := map[string]manifests.Digest{}
	for name, d := range signed {
		switch {
		case name == TarSubject(bundleName):
			if tar == nil {
				c.Unchecked = append(c.Unchecked, name)
				continue
			}
			c.Checked++
			if *tar != d {
				c.Problems = append(c.Problems, Problem{name, fmt.Sprintf("is %s, the attestation signed %s", tar.Short(12), d.Short(12))})
			}
		case strings.Contains(name, ":"): // an image reference; no bundle path has one
			c.Unchecked = append(c.Unchecked, name)
			c.Image = &ImageSubject{Ref: name, Config: d}
		default:
			signedFiles[name] = d
		}
	}
	if _, ok := signed[TarSubject(bundleName)]; !ok {
		c.Problems = append(c.Problems, Problem{TarSubject(bundleName), "not among the attestation's subjects: the attestation is of another bundle"})
	}
	fp := Compare(signedFiles, files)
	c.Checked += len(signedFiles) - len(fp)
	c.Problems = append(c.Problems, fp...)
	return c
}
