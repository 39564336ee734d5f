//go:build !sealbench_bundle

package cmd

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runs"
)

// completeValues registers, on every command under root, what a shell
// completes for the flags and arguments whose values sealbench knows:
// target kinds, suites and cells (by name, with their titles), report formats, run
// ids, and directories where a directory is meant. The rest complete as
// files, the shell's default. `sealbench completion bash|zsh|fish`
// writes the script that asks for them.
func completeValues(root *cobra.Command) {
	root.CompletionOptions.DisableDefaultCmd = false
	walk(root, func(c *cobra.Command) {
		for flag, fn := range map[string]cobra.CompletionFunc{
			"target": completeList(targetCompletions),
			"cells":  completeList(cellCompletions),
			"suite":  completeList(suiteCompletions),
			"format": cobra.FixedCompletions(reportFormats(), cobra.ShellCompDirectiveNoFileComp),
			"run":    completeRunIDs,
		} {
			if c.Flags().Lookup(flag) != nil {
				c.RegisterFlagCompletionFunc(flag, fn)
			}
		}
		// Directories, where a directory is meant (verify's --bundle
		// takes a tar too, report's --out a file).
		switch c.CommandPath() {
		case "sealbench run", "sealbench provision", "sealbench image":
			c.RegisterFlagCompletionFunc("bundle", completeDirs)
		case "sealbench push":
			c.RegisterFlagCompletionFunc("results", completeDirs) // a run directory
		}
		if c.Flags().Lookup("suite-dir") != nil {
			c.RegisterFlagCompletionFunc("suite-dir", completeDirs)
		}
		switch c.CommandPath() {
		case "sealbench run", "sealbench seal", "sealbench keygen", "sealbench image", "sealbench image export-debs", "sealbench image lock":
			c.RegisterFlagCompletionFunc("out", completeDirs)
		}
	})
	for _, c := range root.Commands() {
		switch c.Name() {
		case "report":
			c.ValidArgsFunction = completeDirs // run directories
		case "provision":
			c.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return targetCompletions(), cobra.ShellCompDirectiveNoFileComp
			}
		}
	}
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// targetCompletions are the registered kinds, each with what it is; a
// kind that takes a host is offered with "@ssh://" too.
func targetCompletions() []cobra.Completion {
	var out []cobra.Completion
	for _, r := range provision.Registered() {
		out = append(out, cobra.CompletionWithDesc(r.Name, r.What))
		if r.Remote != nil {
			out = append(out, cobra.CompletionWithDesc(r.Name+"@ssh://", r.What+", on a host over SSH"))
		}
	}
	return out
}

// cellCompletions are the built-in suites' cells' codes, each with its
// title.
func cellCompletions() []cobra.Completion {
	var out []cobra.Completion
	for _, s := range cells.Suites() {
		for _, c := range s.Cells {
			out = append(out, cobra.CompletionWithDesc(c.Name, c.Title))
		}
	}
	return out
}

// suiteCompletions are the built-in suites' names, each with its title.
func suiteCompletions() []cobra.Completion {
	var out []cobra.Completion
	for _, s := range cells.Suites() {
		out = append(out, cobra.CompletionWithDesc(s.Name, s.Title))
	}
	return out
}

// completeList completes the last item of a comma-separated list from
// values, leaving out the items already given: "--cells C01,C0" offers
// "C01,C02" and on. After a comma the values go without their
// descriptions: bash's script matches what was typed against each
// candidate escaped by printf %q, which escapes the comma, unless there
// are no descriptions.
func completeList(values func() []cobra.Completion) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		given, last := "", toComplete
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			given, last = toComplete[:i+1], toComplete[i+1:]
		}
		have := strings.Split(strings.TrimSuffix(given, ","), ",")
		var out []cobra.Completion
		for _, v := range values() {
			name, _, _ := strings.Cut(v, "\t")
			if !strings.HasPrefix(name, last) || slices.Contains(have, name) {
				continue
			}
			if given != "" {
				v = name
			}
			out = append(out, given+v)
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// completeRunIDs offers the runs in the default state directory, newest
// first, as teardown --run and audit --run take them.
func completeRunIDs(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ids, err := runs.ListRuns(runs.DefaultStateDir())
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	slices.Reverse(ids)
	return ids, cobra.ShellCompDirectiveNoFileComp
}

func completeDirs(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}
