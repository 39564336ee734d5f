package faketool

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// msbCmd is microsandbox's `msb`, as superradcompany/microsandbox's
// crates/cli/lib/commands describe it (create.rs and common.rs'
// SandboxOpts: --name, --cpus/-c, --memory/-m, --label, --no-net;
// list.rs: [{name, status, created_at, image}]; image.rs: load --input,
// inspect --format json with config.digest, rm --force).
func msbCmd(f *fake, args []string) error {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-V") {
		printVersion("msb %s\n", "0.3.0")
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
			"--cpus=": "cpus", "-c=": "cpus", "--memory=": "memory", "-m=": "memory", "--no-net": "no-net", "--quiet": "q", "-q": "q"})
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
		fl, err := listFlags(args[1:], map[string]string{"--label=": "label", "--running": "r", "--stopped": "s"})
		if err != nil {
			return err
		}
		out := []any{}
		for _, s := range sortedVMs(f.st.Sandboxes) {
			if l := one(fl, "label"); l != "" && !labelsMatch(s.Labels, l) {
				continue
			}
			out = append(out, map[string]any{"name": s.Name, "status": "Running", "created_at": s.Created.Format(time.RFC3339), "image": s.Image})
		}
		return printJSON(out)
	case "rm", "remove":
		fl, pos, err := flags(args[1:], map[string]string{"--force": "force", "-f": "force", "--label=": "label", "--quiet": "q", "-q": "q"})
		if err != nil {
			return err
		}
		if fl["force"] == nil {
			return usage("the fake removes only with --force")
		}
		l := one(fl, "label")
		if (l == "") == (len(pos) == 0) {
			return usage("rm takes names or --label, not both")
		}
		var keep []*vm
		removed := map[string]bool{}
		for _, s := range f.st.Sandboxes {
			match := l != "" && labelsMatch(s.Labels, l)
			for _, n := range pos {
				match = match || s.Name == n
			}
			if !match {
				keep = append(keep, s)
				continue
			}
			if err := s.stop(); err != nil {
				return err
			}
			removed[s.Name] = true
		}
		for _, n := range pos {
			if !removed[n] {
				return failure(fmt.Sprintf("sandbox '%s' not found", n))
			}
		}
		f.st.Sandboxes = keep
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
		fl, pos, err := flags(args[1:], map[string]string{"--input=": "input", "-i=": "input", "--quiet": "q", "-q": "q"})
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
// guest's paths mapped, stdin and stdout passed straight through. The
// state lock is released first: an exec can last as long as a connection.
func (f *fake) msbExec(args []string) error {
	if len(args) == 0 {
		return usage("exec takes a sandbox name")
	}
	name := args[0]
	fl, pos, err := flags(args[1:], map[string]string{"--no-tty": "no-tty", "--interactive": "i", "-i": "i"})
	if err != nil {
		return err
	}
	if fl["no-tty"] == nil {
		return usage("the fake execs only with --no-tty")
	}
	if len(pos) == 0 {
		return usage("exec needs a command after --")
	}
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
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Dir = root
	f.unlockEarly()
	if err := cmd.Run(); err != nil {
		if xe, ok := err.(*exec.ExitError); ok {
			os.Exit(xe.ExitCode())
		}
		return failure(err.Error())
	}
	return nil
}
