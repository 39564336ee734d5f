package docker

import "testing"

// TestRunscPins: the version and platform come from what runsc and the
// dockerd's runtime arguments say, in each form they take.
func TestRunscPins(t *testing.T) {
	for out, want := range map[string]string{
		"runsc version v0.0.0-20260905035102-160fafc42237\nspec: 1.2.1\n": "v0.0.0-20260905035102-160fafc42237",
		"runsc version 0.0~20221219.0-1\nspec: 1.0.2-dev\n":               "0.0~20221219.0-1", // Debian's
		"something else\n": "something else",
	} {
		if got := runscVersion(out); got != want {
			t.Errorf("runscVersion(%q) = %q, want %q", out, got, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--platform=systrap", "--network=none"}, "systrap"},
		{[]string{"--network=none", "--platform", "ptrace"}, "ptrace"},
		{nil, "runsc's default"},
	} {
		if got := runscPlatform(c.args); got != c.want {
			t.Errorf("runscPlatform(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
