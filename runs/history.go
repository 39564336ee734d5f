package runs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sealbench/sealbench/manifests"
)

// HistoryFile, in the state directory, lists the id of every run made
// there, one a line, appended as each run is made. A run's directory goes
// at teardown; this stays, so that `audit --run ID` can tell a run torn
// down completely from one that never existed here.
const HistoryFile = "runs.history"

// recordRun appends id to the state directory's history.
func recordRun(stateDir, id string) error {
	f, err := os.OpenFile(filepath.Join(stateDir, HistoryFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("recording run %s: %w", id, err)
	}
	if _, err := f.WriteString(id + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("recording run %s: %w", id, err)
	}
	return f.Close()
}

// RunKnown says whether run id was made under stateDir: its directory is
// there, or the history names it.
func RunKnown(stateDir, id string) bool {
	if manifests.ValidateRunID(id) != nil {
		return false
	}
	if _, err := os.Lstat(filepath.Join(RunsDir(stateDir), id)); err == nil {
		return true
	}
	f, err := os.Open(filepath.Join(stateDir, HistoryFile))
	if err != nil {
		return false
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		if s.Text() == id {
			return true
		}
	}
	return false
}
