package provision

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/pflag"
)

// Command names a command a target's options are offered to: run and
// provision make targets and take all of a target's flags; teardown,
// audit and doctor reach what targets hold, and take the few flags that
// say where (a kubeconfig).
type Command string

// The commands that take targets' flags.
const (
	CommandRun       Command = "run"
	CommandProvision Command = "provision"
	CommandTeardown  Command = "teardown"
	CommandAudit     Command = "audit"
	CommandDoctor    Command = "doctor"
)

// MakesTargets says whether c brings targets up (run, provision).
func (c Command) MakesTargets() bool { return c == CommandRun || c == CommandProvision }

// Options are a target's own flags and the values they take. Its package
// defines them (Registration.Options); a command adds them to its flags,
// checks them, and hands them to the target through NewOptions.Options.
// Targets that share flags (the VM targets' --vm-cpus) give options of
// one Kind, which a command makes once.
type Options interface {
	// Kind names the options. Every Options value of a kind MUST be of
	// one type.
	Kind() string
	// Flags adds the options' flags for command c to fs: all of them,
	// some (teardown, audit and doctor take what reaches what a target
	// holds), or none. Flags MUST NOT add a flag another kind adds.
	Flags(fs *pflag.FlagSet, c Command)
	// Check refuses values no target could use, before anything is
	// made: a *UsageError naming the flag and what it takes.
	Check() error
}

// Applier is Options that commands which make no target (teardown, audit,
// doctor) apply to the process, where the targets' Backends and checks
// find them: a kubeconfig into KUBECONFIG, say. Apply runs after Check.
type Applier interface {
	Apply() error
}

// UsageError is a flag value a target's options refuse: the commands exit
// with the usage code and say Hint.
type UsageError struct {
	Err  error
	Hint string
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// OptionSet is a command's targets' options, one of each kind.
type OptionSet map[string]Options

// Flags adds every registered target's options to fs for command c, each
// kind once, and returns them: the values fs fills once parsed.
func Flags(fs *pflag.FlagSet, c Command) OptionSet {
	set := OptionSet{}
	for _, r := range Registered() {
		for _, make := range r.Options {
			o := make()
			if _, have := set[o.Kind()]; have {
				continue
			}
			o.Flags(fs, c)
			set[o.Kind()] = o
		}
	}
	return set
}

// Check checks every kind's options, in kind order, and returns the first
// refusal.
func (s OptionSet) Check() error {
	for _, k := range s.kinds() {
		if err := s[k].Check(); err != nil {
			return err
		}
	}
	return nil
}

// Apply checks every kind's options, then applies those that apply to the
// process (Applier).
func (s OptionSet) Apply() error {
	if err := s.Check(); err != nil {
		return err
	}
	for _, k := range s.kinds() {
		if a, ok := s[k].(Applier); ok {
			if err := a.Apply(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s OptionSet) kinds() []string {
	ks := make([]string, 0, len(s))
	for k := range s {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// OptionsOf returns the options of P's kind in s, or P's zero value (every
// option at its default) when s has none: a target reads its own options
// with it, the package that defines P the only one that names it.
func OptionsOf[T any, P interface {
	*T
	Options
}](s OptionSet) P {
	var zero P = new(T)
	if o, ok := s[zero.Kind()].(P); ok {
		return o
	}
	return zero
}

// Subcommand is a hidden command a target's provisioner starts as a
// process of the run (the qemu target's link, the kube-engine): the
// sealbench binary serves it, the target's package says how.
type Subcommand struct {
	Name  string // the command's name: its first argument
	Usage string // its arguments, for the help
	Short string
	// Run serves the command: args are its arguments, unparsed; logf
	// writes progress to stderr. A refusal of args is a *UsageError.
	Run func(ctx context.Context, args []string, logf func(string, ...any)) error
}

// Subcommands lists every registered target's subcommands.
func Subcommands() []Subcommand {
	var out []Subcommand
	for _, r := range Registered() {
		out = append(out, r.Subcommands...)
	}
	return out
}

// LeftUp is a Target on a remote host that can be left up after the
// process that brought it up exits (sealbench provision): Reach says what
// reaches its Engine from here then: an endpoint for DOCKER_HOST and, when
// that endpoint needs a forward that the user's ssh must hold, the ssh
// command line that holds it.
type LeftUp interface {
	Reach() (endpoint, forward string, err error)
}

// ErrNotLeftUp is returned for a target that cannot be left up on a
// remote host.
var ErrNotLeftUp = errors.New("this target cannot be left up on a remote host")

// ReadableFile is nil when p is a regular file this process can open:
// what a flag that names a key, a kubeconfig or a known_hosts file takes.
func ReadableFile(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	return fh.Close()
}
