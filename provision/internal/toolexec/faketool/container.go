package faketool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sealbench/sealbench/manifests"
)

// containerCmd is Apple's `container`, as its command reference
// (docs/command-reference.md) and Sources/CLI describe it.
func containerCmd(f *fake, args []string) error {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-v") {
		printVersion("container CLI version %s (build: release, commit: 0123abc)\n", "0.6.0")
		return nil
	}
	if len(args) == 0 {
		return usage("missing subcommand")
	}
	sub, rest := args[0], args[1:]
	if sub != "system" && sub != "--version" && f.st.SystemStopped {
		return failure("interrupted: \"XPC connection error: Connection invalid\"\nEnsure container system service has been started with `container system start`.")
	}
	switch sub {
	case "system":
		return f.system(rest)
	case "image":
		return f.image(rest)
	case "volume":
		return f.volume(rest)
	case "list", "ls":
		if _, err := listFlags(rest, map[string]string{"--all": "all", "-a": "all"}); err != nil {
			return err
		}
		return f.listContainers()
	case "run":
		return f.runContainer(rest)
	case "delete", "rm":
		fl, pos, err := flags(rest, map[string]string{"--force": "force", "-f": "force", "--all": "all", "-a": "all"})
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			return usage("no container given")
		}
		for _, n := range pos {
			i := f.findVM(f.st.Containers, n)
			if i < 0 {
				return failure(fmt.Sprintf("notFound: \"container %s not found\"", n))
			}
			c := f.st.Containers[i]
			if c.running() && fl["force"] == nil {
				return failure(fmt.Sprintf("invalidState: \"container %s is running\"", n))
			}
			if err := c.stop(); err != nil {
				return err
			}
			f.st.Containers = append(f.st.Containers[:i], f.st.Containers[i+1:]...)
			fmt.Println(n)
		}
		return nil
	case "logs":
		if len(rest) != 1 {
			return usage("logs takes one container")
		}
		i := f.findVM(f.st.Containers, rest[0])
		if i < 0 {
			return failure(fmt.Sprintf("notFound: \"container %s not found\"", rest[0]))
		}
		b, _ := os.ReadFile(filepath.Join(f.st.Containers[i].Root, "init.log"))
		os.Stdout.Write(b)
		return nil
	}
	return usage(fmt.Sprintf("Unexpected argument '%s'", sub))
}

func (f *fake) findVM(vs []*vm, name string) int {
	for i, v := range vs {
		if v.Name == name {
			return i
		}
	}
	return -1
}

func (f *fake) system(args []string) error {
	if len(args) == 0 {
		return usage("missing system subcommand")
	}
	switch args[0] {
	case "status":
		if len(args) != 1 {
			return usage("Unexpected argument '" + args[1] + "'")
		}
		if f.st.SystemStopped {
			fmt.Println("apiserver is not running and not registered with launchd")
			return failure("")
		}
		fmt.Println("apiserver is running")
		return nil
	case "start":
		if _, pos, err := flags(args[1:], map[string]string{"--enable-kernel-install": "k", "--disable-kernel-install": "nk"}); err != nil {
			return err
		} else if len(pos) > 0 {
			return usage("Unexpected argument '" + pos[0] + "'")
		}
		f.st.SystemStopped = false
		return nil
	}
	return usage("Unexpected argument '" + args[0] + "'")
}

// The JSON shapes: PrintableContainer, ImageDescription and Volume of
// apple/container's Sources.
type (
	jsonContainer struct {
		Status        string         `json:"status"`
		Configuration map[string]any `json:"configuration"`
		Networks      []any          `json:"networks"`
	}
	jsonImage struct {
		Reference  string         `json:"reference"`
		Descriptor map[string]any `json:"descriptor"`
	}
)

func (f *fake) listContainers() error {
	out := []jsonContainer{}
	for _, c := range sortedVMs(f.st.Containers) {
		status := "stopped"
		if c.running() {
			status = "running"
		}
		mounts := []any{}
		for _, v := range c.Volumes {
			mounts = append(mounts, map[string]any{
				"type":   map[string]any{"volume": map[string]any{"name": v, "format": "ext4", "cache": map[string]any{"auto": map[string]any{}}, "sync": map[string]any{"full": map[string]any{}}}},
				"source": "/Users/x/Library/Application Support/com.apple.container/volumes/" + v + "/volume.img", "destination": "/data", "options": []string{},
			})
		}
		socks := []any{}
		if c.Host != "" {
			socks = append(socks, map[string]any{"containerPath": "file://" + c.Guest, "hostPath": "file://" + c.Host})
		}
		out = append(out, jsonContainer{Status: status, Networks: []any{}, Configuration: map[string]any{
			"id":               c.Name,
			"image":            map[string]any{"reference": c.Image, "descriptor": map[string]any{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": "sha256:" + strings.Repeat("ab", 32), "size": 1234}},
			"mounts":           mounts,
			"publishedPorts":   []any{},
			"publishedSockets": socks,
			"labels":           c.Labels,
			"sysctls":          map[string]any{},
			"networks":         []any{},
			"rosetta":          false,
			"initProcess":      map[string]any{"executable": manifests.SandboxBundleDir + "/bin/standin"},
			"platform":         map[string]any{"os": "linux", "architecture": "arm64"},
			"resources":        map[string]any{"cpus": c.CPUs, "memoryInBytes": c.Memory},
			"runtimeHandler":   "container-runtime-linux",
		}})
	}
	return printJSON(out)
}

func normal(ref string) string {
	if strings.Count(ref, "/") == 0 {
		return "docker.io/library/" + ref
	}
	if !strings.Contains(strings.Split(ref, "/")[0], ".") {
		return "docker.io/" + ref
	}
	return ref
}

func (f *fake) image(args []string) error {
	if len(args) == 0 {
		return usage("missing image subcommand")
	}
	switch args[0] {
	case "load":
		fl, pos, err := flags(args[1:], map[string]string{"--input=": "input", "-i=": "input"})
		if err != nil {
			return err
		}
		if len(pos) > 0 || one(fl, "input") == "" {
			return usage("image load takes --input <input> and nothing else")
		}
		ims, err := readDockerSave(one(fl, "input"))
		if err != nil {
			return err
		}
		for _, im := range ims {
			im.Reference = normal(im.Reference)
			f.st.Images = append(removeImage(f.st.Images, im.Reference), im)
			fmt.Printf("Loaded image: %s\n", im.Reference)
		}
		return nil
	case "list", "ls":
		if _, err := listFlags(args[1:], map[string]string{"--verbose": "v", "-v": "v"}); err != nil {
			return err
		}
		out := []jsonImage{}
		for _, im := range f.st.Images {
			out = append(out, jsonImage{Reference: im.Reference, Descriptor: map[string]any{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": im.Digest, "size": 529}})
		}
		return printJSON(out)
	case "delete", "rm":
		_, pos, err := flags(args[1:], map[string]string{"--all": "all", "-a": "all"})
		if err != nil {
			return err
		}
		for _, ref := range pos {
			n := normal(ref)
			if !hasImage(f.st.Images, n) {
				return failure(fmt.Sprintf("notFound: \"image %s not found\"", ref))
			}
			for _, c := range f.st.Containers {
				if c.Image == n {
					return failure(fmt.Sprintf("invalidState: \"image %s is in use by container %s\"", ref, c.Name))
				}
			}
			f.st.Images = removeImage(f.st.Images, n)
			fmt.Println(ref)
		}
		return nil
	}
	return usage("Unexpected argument '" + args[0] + "'")
}

func (f *fake) volume(args []string) error {
	if len(args) == 0 {
		return usage("missing volume subcommand")
	}
	switch args[0] {
	case "list", "ls":
		if _, err := listFlags(args[1:], nil); err != nil {
			return err
		}
		out := []any{}
		for _, v := range f.st.Volumes {
			out = append(out, map[string]any{"name": v.Name, "driver": "local", "format": "ext4", "source": "/x/" + v.Name, "labels": v.Labels, "options": map[string]any{}, "createdAt": 7.8e8})
		}
		return printJSON(out)
	case "create":
		fl, pos, err := flags(args[1:], map[string]string{"--label=": "label", "-s=": "size", "--opt=": "opt"})
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usage("volume create takes one name")
		}
		labels, err := parseLabels(fl["label"])
		if err != nil {
			return err
		}
		for _, v := range f.st.Volumes {
			if v.Name == pos[0] {
				return failure(fmt.Sprintf("exists: \"volume %s already exists\"", pos[0]))
			}
		}
		f.st.Volumes = append(f.st.Volumes, volume{Name: pos[0], Labels: labels})
		fmt.Println(pos[0])
		return nil
	case "delete", "rm":
		_, pos, err := flags(args[1:], map[string]string{"--all": "all", "-a": "all"})
		if err != nil {
			return err
		}
		for _, n := range pos {
			for _, c := range f.st.Containers {
				for _, v := range c.Volumes {
					if v == n {
						return failure(fmt.Sprintf("invalidState: \"volume %s is in use by container %s\"", n, c.Name))
					}
				}
			}
			var keep []volume
			found := false
			for _, v := range f.st.Volumes {
				if v.Name == n {
					found = true
				} else {
					keep = append(keep, v)
				}
			}
			if !found {
				return failure(fmt.Sprintf("notFound: \"volume %s not found\"", n))
			}
			f.st.Volumes = keep
			fmt.Println(n)
		}
		return nil
	}
	return usage("Unexpected argument '" + args[0] + "'")
}

func (f *fake) runContainer(args []string) error {
	fl, pos, err := flags(args, map[string]string{
		"--detach": "detach", "-d": "detach", "--name=": "name", "--label=": "label", "-l=": "label",
		"--cpus=": "cpus", "-c=": "cpus", "--memory=": "memory", "-m=": "memory", "--network=": "network",
		"--publish-socket=": "publish-socket", "--rm": "rm", "--remove": "rm",
	})
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usage("run takes an image and a command")
	}
	if fl["detach"] == nil {
		return usage("the fake runs only --detach")
	}
	name := one(fl, "name")
	if name == "" {
		return usage("the fake needs --name")
	}
	if f.findVM(f.st.Containers, name) >= 0 {
		return failure(fmt.Sprintf("exists: \"container with id %s already exists\"", name))
	}
	if net := one(fl, "network"); net != "none" {
		return usage(fmt.Sprintf("the fake runs only --network none (got %q)", net))
	}
	ref := normal(pos[0])
	if !hasImage(f.st.Images, ref) {
		return failure(fmt.Sprintf("notFound: \"image %s not found\" (the fake does not pull)", pos[0]))
	}
	c, err := f.newVM(name, ref, fl, 0)
	if err != nil {
		return err
	}
	root := c.Root
	if ps := one(fl, "publish-socket"); ps != "" {
		host, guest, ok := strings.Cut(ps, ":")
		if !ok || !filepath.IsAbs(host) || !filepath.IsAbs(guest) {
			return usage(fmt.Sprintf("bad --publish-socket %q (host_path:container_path)", ps))
		}
		if _, err := os.Stat(filepath.Dir(host)); err != nil {
			return failure(fmt.Sprintf("invalidArgument: publish socket host directory: %v", err))
		}
		c.Host, c.Guest = host, guest
	}
	if os.Getenv(AnonEnv) != "" {
		v := "anon-" + strings.ToLower(strings.TrimPrefix(filepath.Base(root), "")) + "-0000-4000-8000-000000000000"
		f.st.Volumes = append(f.st.Volumes, volume{Name: v, Labels: map[string]string{}})
		c.Volumes = append(c.Volumes, v)
	}
	argv := mapArgs(root, pos[1:])
	argv[0] = guestPath(root, pos[1])
	pid, err := startDetached(argv, nil, filepath.Join(root, "init.log"))
	if err != nil {
		os.RemoveAll(root)
		return err
	}
	c.Pids = append(c.Pids, pid)
	if c.Host != "" {
		self, _ := os.Executable()
		rpid, err := startDetached([]string{self}, []string{relayEnv + "=" + c.Host, relayTo + "=" + guestPath(root, c.Guest)}, filepath.Join(root, "relay.log"))
		if err != nil {
			return err
		}
		c.Pids = append(c.Pids, rpid)
	}
	f.st.Containers = append(f.st.Containers, c)
	fmt.Println(name)
	return nil
}
