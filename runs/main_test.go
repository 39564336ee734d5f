package runs

import (
	"os"
	"testing"
)

// helperEnv, set in a test binary's environment, makes it a helper
// process instead of running the tests (see helpers in *_test.go).
const helperEnv = "SEALBENCH_RUNS_TEST_HELPER"

// helpers are the helper processes by name.
var helpers = map[string]func(){}

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		helpers[h]()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
