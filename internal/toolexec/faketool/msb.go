package faketool

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"
)

// msbCmd is microsandbox's `msb` v0.6.14, as superradcompany/
// microsandbox's sources at the tag v0.6.14 define it (and v0.6.8, where
// the parts used here are the same): crates/cli/bin/main.rs (the
// commands, clap's --version: "msb <version>"), and in
// crates/cli/lib/commands create.rs with common.rs' SandboxOpts
// (-n/--name, -c/--cpus, -m/--memory, --label, --no-net, -q/--quiet,
// --replace), exec.rs, list.rs, remove.rs and image.rs. Each function
// below names what it follows.
func msbCmd(f *fake, args []string) error {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-V") {
		printVersion("msb %s\n", "0.6.14")
		return nil
	}
	if len(args) == 0 {
		return usage("missing subcommand")
	}
	switch args[0] {
	case "image":
		return f.msbImage(args[1:])
	case "create":
		fl, pos, err := flags(args[1:], map[string]string{"--name=": "name", "-n=": "name", "--label=": "label",
			"--cpus=": "cpus", "-c=": "cpus", "--memory=": "memory", "-m=": "memory", "--no-net": "no-net", "--quiet": "q", "-q": "q",
			"--replace": "replace", "*": ""})
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usage("create takes one image")
		}
		name := one(fl, "name")
		if name == "" || fl["no-net"] == nil {
			return usage("the fake creates only named sandboxes with --no-net")
		}
		if f.findVM(f.st.Sandboxes, name) >= 0 {
			return failure(fmt.Sprintf("sandbox '%s' already exists", name))
		}
		if !hasImage(f.st.MsbImages, pos[0]) {
			return failure(fmt.Sprintf("image '%s' not found (the fake does not pull)", pos[0]))
		}
		s, err := f.newVM(name, pos[0], fl, 255)
		if err != nil {
			return err
		}
		f.st.Sandboxes = append(f.st.Sandboxes, s)
		return nil
	case "exec":
		return f.msbExec(args[1:])
	case "ls", "list":
		// list.rs: --running, --stopped, --label (repeatable, AND-matched
		// by key and value: a bare KEY wants the empty value), --format
		// json, -q; print_json: name, status, created_at, image, no labels.
		fl, err := listFlags(args[1:], map[string]string{"--label=": "label", "--running": "r", "--stopped": "s"})
		if err != nil {
			return err
		}
		out := []any{}
		for _, s := range sortedVMs(f.st.Sandboxes) {
			if !msbLabelsMatch(s.Labels, fl["label"]) {
				continue
			}
			out = append(out, map[string]any{"name": s.Name, "status": "Running", "created_at": s.Created.Format(time.RFC3339), "image": s.Image})
		}
		return printJSON(out)
	case "rm", "remove":
		// remove.rs: names (required unless --label) unioned with every
		// sandbox the --label selectors match (common.rs
		// resolve_bulk_targets); --force stops a running one first; a
		// name not found fails at the end (exit 1), labels matching
		// nothing only warn.
		fl, pos, err := flags(args[1:], map[string]string{"--force": "force", "-f": "force", "--label=": "label", "--quiet": "q", "-q": "q", "*": ""})
		if err != nil {
			return err
		}
		if len(pos) == 0 && len(fl["label"]) == 0 {
			return usage("the following required arguments were not provided: <NAMES>...")
		}
		targets := map[string]bool{}
		for _, n := range pos {
			targets[n] = true
		}
		if len(fl["label"]) > 0 {
			for _, s := range f.st.Sandboxes {
				if msbLabelsMatch(s.Labels, fl["label"]) {
					targets[s.Name] = true
				}
			}
		}
		var keep []*vm
		var failed []string
		for _, s := range f.st.Sandboxes {
			if !targets[s.Name] {
				keep = append(keep, s)
				continue
			}
			delete(targets, s.Name)
			if s.running() && fl["force"] == nil {
				failed = append(failed, fmt.Sprintf("sandbox '%s' is still running", s.Name))
				keep = append(keep, s)
				continue
			}
			if err := s.stop(); err != nil {
				return err
			}
		}
		for n := range targets {
			failed = append(failed, fmt.Sprintf("sandbox '%s' not found", n))
		}
		f.st.Sandboxes = keep
		if len(failed) > 0 {
			sort.Strings(failed)
			return failure(strings.Join(failed, "\n"))
		}
		return nil
	}
	return usage(fmt.Sprintf("unrecognized subcommand '%s'", args[0]))
}

func (f *fake) msbImage(args []string) error {
	if len(args) == 0 {
		return usage("missing image subcommand")
	}
	switch args[0] {
	case "load":
		// image.rs ImageLoadArgs: -i/--input, -t/--tag, -q/--quiet; the
		// references of a docker-save archive are its RepoTags, as they
		// are (crates/image/lib/archive/docker.rs load_archive), its id
		// the sha256 of its config.
		fl, pos, err := flags(args[1:], map[string]string{"--input=": "input", "-i=": "input", "--tag=": "tag", "-t=": "tag", "--quiet": "q", "-q": "q"})
		if err != nil {
			return err
		}
		if len(pos) > 0 || one(fl, "input") == "" {
			return usage("image load takes --input PATH")
		}
		ims, err := readDockerSave(one(fl, "input"))
		if err != nil {
			return err
		}
		for _, im := range ims {
			f.st.MsbImages = append(removeImage(f.st.MsbImages, im.Reference), im)
		}
		return nil
	case "inspect":
		fl, pos, err := flags(args[1:], map[string]string{"--format=": "format", "*": ""})
		if err != nil {
			return err
		}
		if len(pos) != 1 || one(fl, "format") != "json" {
			return usage("image inspect takes one reference and --format json")
		}
		for _, im := range f.st.MsbImages {
			if im.Reference == pos[0] {
				return printJSON(map[string]any{"reference": im.Reference, "digest": im.Digest, "size_bytes": 1 << 20, "architecture": "arm64", "os": "linux",
					"layer_count": 1, "created_at": nil, "config": map[string]any{"digest": im.Config, "env": []string{"PATH=/bin"}, "cmd": []string{"sh"}}, "layers": []any{}})
			}
		}
		return failure(fmt.Sprintf("image '%s' not found", pos[0]))
	case "list", "ls":
		if _, err := listFlags(args[1:], nil); err != nil {
			return err
		}
		out := []any{}
		for _, im := range f.st.MsbImages {
			out = append(out, map[string]any{"reference": im.Reference, "digest": im.Digest, "size_bytes": 1 << 20, "architecture": "arm64", "os": "linux", "layer_count": 1, "created_at": nil})
		}
		return printJSON(out)
	case "rm", "remove":
		fl, pos, err := flags(args[1:], map[string]string{"--force": "force", "-f": "force", "--quiet": "q", "-q": "q", "*": ""})
		if err != nil {
			return err
		}
		for _, ref := range pos {
			if !hasImage(f.st.MsbImages, ref) {
				return failure(fmt.Sprintf("image '%s' not found", ref))
			}
			for _, s := range f.st.Sandboxes {
				if s.Image == ref && fl["force"] == nil {
					return failure(fmt.Sprintf("image '%s' is used by sandbox '%s'", ref, s.Name))
				}
			}
			f.st.MsbImages = removeImage(f.st.MsbImages, ref)
		}
		return nil
	}
	return usage(fmt.Sprintf("unrecognized subcommand '%s'", args[0]))
}

// msbExec runs the command "in the sandbox": on the host, with the
// guest's paths mapped, as exec.rs does it. With --stream, stdin and
// stdout pass straight through as they come (run_stream). Without it
// (and with --no-tty or a stdin that is no terminal: the fake has no
// PTY), stdin is read to its end before the command starts, and its
// output is written when it has exited (should_read_buffered_stdin,
// run_started's exec_with, which collects the output). The state lock is
// released first: an exec can last as long as a connection.
func (f *fake) msbExec(args []string) error {
	if len(args) == 0 {
		return usage("exec takes a sandbox name")
	}
	name := args[0]
	fl, pos, err := flags(args[1:], map[string]string{"--no-tty": "no-tty", "--stream": "stream", "--tty": "tty", "-t": "tty",
		"--env=": "env", "-e=": "env", "--workdir=": "workdir", "-w=": "workdir", "--user=": "user", "-u=": "user",
		"--timeout=": "timeout", "--rlimit=": "rlimit", "--quiet": "q", "-q": "q"})
	if err != nil {
		return err
	}
	switch {
	case fl["tty"] != nil && (fl["no-tty"] != nil || fl["stream"] != nil):
		return usage("the argument '--tty' cannot be used with '--no-tty' or '--stream'")
	case fl["tty"] != nil:
		return usage("the fake has no PTY")
	case len(pos) == 0 || len(args) < 2 || slices.Index(args, "--") < 0:
		return usage("exec needs a command after --") // `command` is `last = true`
	}
	stream := fl["stream"] != nil
	i := f.findVM(f.st.Sandboxes, name)
	if i < 0 {
		return failure(fmt.Sprintf("sandbox '%s' not found", name))
	}
	root := f.st.Sandboxes[i].Root
	argv := mapArgs(root, pos)
	argv[0] = guestPath(root, pos[0])
	if pos[0] == "/bin/sh" {
		argv[0] = "/bin/sh"
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = root
	f.unlockEarly()
	var stdout, stderr bytes.Buffer
	if stream {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	} else {
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			return failure(err.Error())
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	}
	err = cmd.Run()
	os.Stdout.Write(stdout.Bytes())
	os.Stderr.Write(stderr.Bytes())
	if err != nil {
		if xe, ok := err.(*exec.ExitError); ok {
			os.Exit(xe.ExitCode())
		}
		return failure(err.Error())
	}
	return nil
}

// msbLabelsMatch is filter_sandbox_ids (sdk/rust/lib/backend/local/
// sandbox/mod.rs) over selectors parsed by ui.rs parse_label: each
// KEY=VALUE, or KEY for the empty value, must be among the labels.
func msbLabelsMatch(l map[string]string, selectors []string) bool {
	for _, sel := range selectors {
		k, v, _ := strings.Cut(sel, "=")
		if got, ok := l[k]; !ok || got != v {
			return false
		}
	}
	return true
}
