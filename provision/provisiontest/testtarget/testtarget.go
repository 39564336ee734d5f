// Package testtarget is a target that exists for tests alone: the proof
// that a target is one package and one import line. It registers
// "testtarget", the dockerd DOCKER_HOST names under another name, with an
// option of its own (--testtarget-label, which it logs when it comes up)
// and a hidden command of its own (testtarget-echo); nothing in cmd/,
// orchestrate/ or provision/ names it. Only tests import it.
package testtarget

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/docker"
)

// Name is the target's name.
const Name = "testtarget"

func init() {
	provision.Register(provision.Registration{
		Name: Name, What: "a test-only target: the dockerd you have, under another name", Order: 1000, HostKernel: true,
		New: func(o provision.NewOptions) (provision.Target, error) {
			log := o.Log
			if log == nil {
				log = func(string, ...any) {}
			}
			log("%s: label %s", Name, provision.OptionsOf[Flags](o.Options).Label)
			return docker.New(docker.Options{Run: o.Run, Log: o.Log, Target: Name})
		},
		Options:  []func() provision.Options{func() provision.Options { return &Flags{} }},
		Needs:    []string{"dockerd"},
		Help:     "It proves that adding a target is a new package and one import line (docs/targets.md).",
		Examples: []string{"  sealbench run --target testtarget --testtarget-label probe --cells C01"},
		Subcommands: []provision.Subcommand{{Name: Name + "-echo", Usage: "WORDS...", Short: "Print the words (a test-only target's hidden command)",
			Run: func(_ context.Context, args []string, logf func(string, ...any)) error {
				if len(args) == 0 {
					return &provision.UsageError{Err: fmt.Errorf("%s-echo needs words", Name), Hint: "pass words to echo"}
				}
				logf("%s", strings.Join(args, " "))
				return nil
			}}},
	})
}

// Flags are the target's own option: a label of one word.
type Flags struct{ Label string }

func (f *Flags) Kind() string { return Name }

func (f *Flags) Flags(fs *pflag.FlagSet, c provision.Command) {
	if c.MakesTargets() {
		fs.StringVar(&f.Label, Name+"-label", "none", "for the test-only target: a word it logs when it comes up")
	}
}

func (f *Flags) Check() error {
	if strings.ContainsAny(f.Label, " \t\n") {
		return &provision.UsageError{Err: fmt.Errorf("--%s-label %q is more than one word", Name, f.Label), Hint: "--" + Name + "-label takes one word"}
	}
	return nil
}
