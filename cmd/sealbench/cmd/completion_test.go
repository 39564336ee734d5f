//go:build !sealbench_bundle

package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/runs"
)

// complete asks for completions as a shell's script does (the hidden
// __complete command) and returns them without the directive line.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	code, stdout, stderr := run(t, append([]string{"__complete"}, args...)...)
	if code != ExitOK {
		t.Fatalf("__complete %q: exit %d: %s", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("__complete %q printed no directive:\n%s", args, stdout)
	}
	return lines[:len(lines)-1]
}

func TestCompletionValues(t *testing.T) {
	state := t.TempDir()
	t.Setenv(runs.StateDirEnv, state)
	for _, id := range []string{"20261201-100000-aaaa", "20261202-100000-bbbb"} {
		if err := os.MkdirAll(filepath.Join(runs.RunsDir(state), id), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args       []string
		want, not  []string // by prefix; by name (before any description)
		onlyPrefix string
		noDesc     bool // after a comma: no descriptions (see completeList)
	}{
		{args: []string{"run", "--cells", "C0"}, want: []string{"C01\tcreate 1,000 files", "C09\tread a 64 MiB base file"}, not: []string{"C10"}},
		{args: []string{"run", "--cells", "C01,C0"}, want: []string{"C01,C02"}, not: []string{"C01,C01"}, onlyPrefix: "C01,", noDesc: true},
		{args: []string{"run", "--suite", ""}, want: []string{"cells\tthe twelve filesystem cells", "agent-tools\tan agent's tool loop"}},
		{args: []string{"run", "--suite", "cells,"}, want: []string{"cells,agent-tools"}, not: []string{"cells,cells"}, noDesc: true},
		{args: []string{"run", "--cells", "T"}, want: []string{"T1\ttraverse 2,048 files in 32 directories", "T5\trg over 2,048 files"}, onlyPrefix: "T"},
		{args: []string{"run", "--target", "do"}, want: []string{"docker\t", "docker@ssh://\t"}, onlyPrefix: "docker"},
		{args: []string{"run", "--target", "local,"}, want: []string{"local,docker", "local,local@ssh://"}, not: []string{"local,local"}, noDesc: true},
		{args: []string{"provision", ""}, want: []string{"local\t", "docker\t"}},
		{args: []string{"report", "--format", ""}, want: []string{"md", "html", "json", "benchstat"}},
		{args: []string{"teardown", "--run", ""}, want: []string{"20261202-100000-bbbb", "20261201-100000-aaaa"}},
		{args: []string{"audit", "--run", "2026"}, want: []string{"20261202-100000-bbbb"}},
		{args: []string{"completion", ""}, want: []string{"bash\t", "zsh\t", "fish\t"}},
	} {
		got := complete(t, tc.args...)
		for _, w := range tc.want {
			if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
				t.Errorf("completing %q: no %q in\n  %s", tc.args, w, strings.Join(got, "\n  "))
			}
		}
		for _, n := range tc.not {
			if slices.ContainsFunc(got, func(g string) bool { name, _, _ := strings.Cut(g, "\t"); return name == n }) {
				t.Errorf("completing %q offers %q:\n  %s", tc.args, n, strings.Join(got, "\n  "))
			}
		}
		for _, g := range got {
			if tc.noDesc && strings.Contains(g, "\t") {
				t.Errorf("completing %q offers %q with a description", tc.args, g)
			}
			if !strings.HasPrefix(g, tc.onlyPrefix) {
				t.Errorf("completing %q offers %q, which does not start with %q", tc.args, g, tc.onlyPrefix)
			}
		}
	}
}

// asCLI, set in a test binary's environment, makes it sealbench itself
// (TestMain), so that a shell's completion script can call it by name.
const asCLI = "SEALBENCH_TEST_AS_CLI"

// installSelf puts this test binary on a new PATH as "sealbench" and
// returns that PATH's environment.
func installSelf(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "sealbench")); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), asCLI+"=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestCompletionInBash sources `sealbench completion bash` in a real bash
// with the bash-completion package, as a user's shell does, and completes
// a command line there.
func TestCompletionInBash(t *testing.T) {
	bash := testenv.NeedCommand(t, "bash")
	const bashCompletion = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bashCompletion); err != nil {
		testenv.Skip(t, "no bash-completion package (%v): make deps installs it", err)
	}
	script := `source ` + bashCompletion + `
source <(sealbench completion bash)
complete -p sealbench
COMP_LINE="sealbench run --cells C01,C1"; COMP_POINT=${#COMP_LINE}; COMP_TYPE=9
COMP_WORDS=(sealbench run --cells C01,C1); COMP_CWORD=3
__start_sealbench
printf 'reply:%s\n' "${COMPREPLY[@]}"
`
	c := exec.Command(bash, "--norc", "--noprofile", "-c", script)
	c.Env = installSelf(t)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := string(out)
	if !strings.Contains(got, "complete -o default -F __start_sealbench sealbench") {
		t.Errorf("the script registered no completion for sealbench:\n%s", got)
	}
	// Several matches: bash lists them; C10, C11, C12 after C01,.
	for _, w := range []string{"reply:C01,C10", "reply:C01,C11", "reply:C01,C12"} {
		if !strings.Contains(got, w) {
			t.Errorf("bash completed no %q:\n%s", w, got)
		}
	}
}

// TestCompletionInFish does the same in fish, whose complete -C prints
// what it would offer, with the cells' titles.
func TestCompletionInFish(t *testing.T) {
	fish := testenv.NeedCommand(t, "fish")
	c := exec.Command(fish, "--no-config", "-c", `sealbench completion fish | source; complete -C"sealbench run --cells C0"`)
	c.Env = installSelf(t)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("fish: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "C06\twrite 64 MiB") {
		t.Errorf("fish offers no C06 with its title:\n%s", out)
	}
}

// TestCompletionZshParses: zsh reads the script without an error and
// defines its completion function (a zsh completion cannot be driven
// without a terminal, so the values are checked above, through the same
// __complete command the script calls).
func TestCompletionZshParses(t *testing.T) {
	zsh := testenv.NeedCommand(t, "zsh")
	c := exec.Command(zsh, "-f", "-c", `autoload -U compinit && compinit -u && source <(sealbench completion zsh) && whence -w _sealbench`)
	c.Env = installSelf(t)
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "_sealbench: function") {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
}
