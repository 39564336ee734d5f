package report

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sealbench/sealbench/manifests"
)

// Load reads results from paths: each a run directory (holding
// samples.jsonl and pins.json) or a samples.jsonl file, whose pins.json is
// read too when it lies next to it. Every problem is an *InputError naming
// the file (and, for samples, the line).
func Load(paths []string) ([]Input, error) {
	var out []Input
	for _, p := range paths {
		in, err := loadOne(p)
		if err != nil {
			return nil, &InputError{Err: err}
		}
		out = append(out, *in)
	}
	return out, nil
}

func loadOne(p string) (*Input, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	samplesPath, pinsPath, pinsRequired := p, filepath.Join(filepath.Dir(p), manifests.PinsFile), false
	if info.IsDir() {
		samplesPath, pinsPath, pinsRequired = filepath.Join(p, manifests.SamplesFile), filepath.Join(p, manifests.PinsFile), true
	}
	// A fifo or a device is refused, never waited on or read forever.
	sb, err := manifests.ReadRegular(samplesPath, 0)
	if err != nil {
		if info.IsDir() && errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s is not a run directory: it has no %s", p, manifests.SamplesFile)
		}
		return nil, fmt.Errorf("reading results: %w", err)
	}
	samples, err := manifests.ReadSamples(bytes.NewReader(sb))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", samplesPath, err)
	}
	in := &Input{Source: p, Samples: samples, SamplesSHA256: manifests.DigestOf(sb)}
	pb, err := manifests.ReadRegular(pinsPath, 0)
	switch {
	case err == nil:
		in.PinsSHA256 = manifests.DigestOf(pb)
		if in.Pins, err = manifests.ReadRunPins(bytes.NewReader(pb)); err != nil {
			return nil, fmt.Errorf("%s: %w", pinsPath, err)
		}
	case errors.Is(err, fs.ErrNotExist) && !pinsRequired:
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s is not a complete run directory: it has no %s", p, manifests.PinsFile)
	default:
		return nil, fmt.Errorf("reading run pins: %w", err)
	}
	return in, nil
}
