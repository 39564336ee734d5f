//go:build linux

package layerfs

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Failpoints let the fault-injection tests stop a Commit or an import at a
// chosen step, in a real process: LAYERFS_FAILPOINTS names steps and what
// happens there, such as "hash-chunk=sleep:20ms" (every chunk hashed is
// slow, for a Commit that lasts) or "blob-installed=kill:3" (the process
// kills itself with SIGKILL at the third blob installed). The steps:
// hash-chunk (a data chunk hashed), blob-installed (a blob renamed into
// place), layer-tx (the Layer's transaction about to commit). Unset, a
// failpoint costs one map lookup of an empty map.
var failpoints = parseFailpoints(os.Getenv("LAYERFS_FAILPOINTS"))

type failpointAction struct {
	sleep time.Duration
	kill  int64 // kill at this hit (1 is the first)

	mu   sync.Mutex
	hits int64
}

func parseFailpoints(s string) map[string]*failpointAction {
	out := map[string]*failpointAction{}
	for _, kv := range strings.Split(s, ",") {
		name, action, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		verb, arg, _ := strings.Cut(action, ":")
		a := &failpointAction{}
		switch verb {
		case "sleep":
			a.sleep, _ = time.ParseDuration(arg)
		case "kill":
			a.kill, _ = strconv.ParseInt(arg, 10, 64)
			if a.kill < 1 {
				a.kill = 1
			}
		default:
			continue
		}
		out[name] = a
	}
	return out
}

// failpointFuncs are functions tests of this package run at a step, set
// before the step can run.
var failpointFuncs = map[string]func(){}

// failpoint runs what LAYERFS_FAILPOINTS says for the step name, if anything.
func failpoint(name string) {
	if f, ok := failpointFuncs[name]; ok {
		f()
	}
	a, ok := failpoints[name]
	if !ok {
		return
	}
	if a.sleep > 0 {
		time.Sleep(a.sleep)
	}
	if a.kill > 0 {
		a.mu.Lock()
		a.hits++
		hit := a.hits
		a.mu.Unlock()
		if hit == a.kill {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}
