package runs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
)

// KindsFile is the file beside a run's ledger that says the kind of each
// of its targets whose name is not its kind (kubernetes-worker-1, a
// kubernetes target on the node worker-1): teardown and the audit find a
// ledger entry's Backend by its target's kind.
const KindsFile = "kinds.json"

var kindsMu sync.Mutex

// RecordTargetKind records, before the target records anything in the
// ledger, that the run's target name is of kind; nothing when the name is
// the kind.
func RecordTargetKind(runDir, name, kind string) error {
	if name == kind {
		return nil
	}
	if !manifests.ValidTargetName(name) {
		return fmt.Errorf("recording the kind of target %q: not a target name", name)
	}
	kindsMu.Lock()
	defer kindsMu.Unlock()
	kinds, err := readKinds(runDir)
	if err != nil {
		return err
	}
	if kinds[name] == kind {
		return nil
	}
	kinds[name] = kind
	b, err := json.MarshalIndent(kinds, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(runDir, KindsFile), append(b, '\n'), 0o600)
}

// TargetKind is the kind of the run's target name: as the run recorded
// it, or the name itself.
func TargetKind(runDir, name string) string {
	if runDir == "" {
		return name
	}
	kinds, err := readKinds(runDir)
	if err != nil || kinds[name] == "" {
		return name
	}
	return kinds[name]
}

func readKinds(runDir string) (map[string]string, error) {
	kinds := map[string]string{}
	b, err := os.ReadFile(filepath.Join(runDir, KindsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return kinds, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &kinds); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(runDir, KindsFile), err)
	}
	return kinds, nil
}
