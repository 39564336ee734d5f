//go:build !sealbench_bundle

package cmd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	_ "github.com/sealbench/sealbench/provision/targets" // every target's registration: the one list of them
)

// targetFlags are the registered targets' own flags on one command
// (provision.Flags): the commands name no target; each target's package
// says what it takes.
type targetFlags struct {
	set provision.OptionSet
}

func (t *targetFlags) flags(fl *pflag.FlagSet, c provision.Command) { t.set = provision.Flags(fl, c) }

// check refuses values no target could use, before anything is made.
func (t *targetFlags) check() error { return targetUsage(t.set.Check()) }

// apply checks the values and applies them to this process, for the
// commands that reach what targets hold without making one (teardown,
// audit, doctor): a kubeconfig into KUBECONFIG, say.
func (t *targetFlags) apply() error { return targetUsage(t.set.Apply()) }

// targetUsage makes a target's refusal of a flag a usage error.
func targetUsage(err error) error {
	var ue *provision.UsageError
	if errors.As(err, &ue) {
		return usageErrorf(ue.Hint, "%v", ue.Err)
	}
	return err
}

// newTargetSubcommands are the hidden commands targets' provisioners
// start as processes of a run (provision.Subcommand).
func newTargetSubcommands(g *global) []*cobra.Command {
	var cmds []*cobra.Command
	for _, s := range provision.Subcommands() {
		cmds = append(cmds, &cobra.Command{
			Use: s.Name + " " + s.Usage, Short: s.Short, Hidden: true, DisableFlagParsing: true,
			RunE: func(c *cobra.Command, args []string) error {
				p := newProgress(g.stderr, s.Name)
				defer p.Close()
				return targetUsage(s.Run(c.Context(), args, p.Logf))
			},
		})
	}
	return cmds
}

// targetHelp lists the registered targets for a command's help: each
// with what it is, and more where its package says more.
func targetHelp() string {
	var b strings.Builder
	for _, r := range provision.Registered() {
		name := r.Name
		if r.Param != "" {
			name += "[:" + r.Param + "]"
		}
		if r.At != "" {
			name += "[@" + r.At + "]"
		}
		if len(name) < 9 {
			b.WriteString(fmt.Sprintf("  %-9s%s.\n", name, r.What))
		} else {
			b.WriteString("  " + name + "\n           " + r.What + ".\n")
		}
		for _, line := range strings.Split(strings.TrimSpace(r.Help), "\n") {
			if line != "" {
				b.WriteString("           " + line + "\n")
			}
		}
	}
	return b.String()
}

// targetExamples are the registered targets' example command lines for
// command (run or provision): "sealbench <command> ..." and their
// comments.
func targetExamples(command string) string {
	var lines []string
	for _, r := range provision.Registered() {
		for _, ex := range r.Examples {
			if strings.Contains(ex, "sealbench "+command+" ") {
				lines = append(lines, ex)
			}
		}
	}
	return strings.Join(lines, "\n\n")
}

// firstExample is the first registered target's first example for
// command: the main job, as the first target shows it.
func firstExample(command string) string {
	ex, _, _ := strings.Cut(targetExamples(command), "\n\n")
	return ex
}

// remoteExample is a --target on a remote host, of the first kind that
// runs on one.
func remoteExample() string {
	if kinds := provision.RemoteKinds(); len(kinds) > 0 {
		return kinds[0] + "@ssh://root@10.0.0.7:2222"
	}
	return "KIND@ssh://root@10.0.0.7:2222"
}

// targetUsageLine is the --target syntax, with every kind.
func targetUsageLine() string {
	return strings.Join(provision.Names(), "|")
}

// sshSettings say how remote hosts (KIND@ssh://USER@HOST) are reached.
type sshSettings struct {
	identity, knownHosts string
}

func (s *sshSettings) flags(fl *pflag.FlagSet) {
	fl.StringVar(&s.identity, "ssh-identity", "", "for targets on remote hosts: the private key to log in with, alone (it must need no passphrase; default: your ssh agent, then the host's IdentityFile in ~/.ssh/config, else ~/.ssh/id_{ed25519,ecdsa,rsa})")
	fl.StringVar(&s.knownHosts, "ssh-known-hosts", "", "for targets on remote hosts: the known_hosts file their host keys are checked against (default: the host's UserKnownHostsFile in ~/.ssh/config, else ~/.ssh/known_hosts); an unknown or changed key is refused")
}

// check refuses an identity or known_hosts file that is not a readable
// file, before anything is made.
func (s sshSettings) check() error {
	for _, f := range []struct{ flag, path string }{{"--ssh-identity", s.identity}, {"--ssh-known-hosts", s.knownHosts}} {
		if f.path == "" {
			continue
		}
		if err := provision.ReadableFile(f.path); err != nil {
			return usageErrorf(f.flag+" takes a file you can read", "%s: %v", f.flag, err)
		}
	}
	return nil
}

func (s sshSettings) options() orchestrate.SSH {
	return orchestrate.SSH{Identity: s.identity, KnownHosts: s.knownHosts}
}

// scope is how audit, teardown and doctor are told which targets to look
// at and how to reach them: --target, the ssh settings, and the targets'
// own options for the command.
type scope struct {
	target string // --target: specs, comma-separated
	ssh    sshSettings
	opts   targetFlags
}

// flags adds the scope's flags to fl, --target's with usage.
func (s *scope) flags(fl *pflag.FlagSet, c provision.Command, usage string) {
	fl.StringVar(&s.target, "target", "", usage)
	s.ssh.flags(fl)
	s.opts.flags(fl, c)
}

// targets is --target split at its commas (nil: every target).
func (s *scope) targets() []string {
	if s.target == "" {
		return nil
	}
	return strings.Split(s.target, ",")
}

// specs parses --target (nil: every target).
func (s *scope) specs() ([]remote.Spec, error) {
	if s.target == "" {
		return nil, nil
	}
	return orchestrate.ParseTargets(s.targets())
}

// check refuses ssh files that cannot be read and target options no
// target could use, and applies the options to this process.
func (s *scope) check() error {
	if err := s.ssh.check(); err != nil {
		return err
	}
	return s.opts.apply()
}
