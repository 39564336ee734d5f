package faketool

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// containerCmd is Apple's `container` 1.2.2, as apple/container's
// sources at the tag 1.2.2 define it (and 1.0.0, where the parts used
// here are the same): the commands in Sources/ContainerCommands, the
// flags of run in Sources/Services/ContainerAPIService/Client/Flags.swift,
// the JSON of the types in Sources/ContainerResource, rendered by
// Sources/ContainerCommands/OutputRendering.swift (keys sorted). Each
// function below names its files.
func containerCmd(f *fake, args []string) error {
	// ReleaseVersion.singleLine (Sources/ContainerVersion/ReleaseVersion.swift),
	// the root command's version (Sources/ContainerCommands/Application.swift).
	if len(args) == 1 && args[0] == "--version" {
		printVersion("container CLI version %s (build: release, commit: 0190097)\n", "1.2.2")
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
	case "list", "ls": // Sources/ContainerCommands/Container/ContainerList.swift
		if _, err := listFlags(rest, map[string]string{"--all": "all", "-a": "all"}); err != nil {
			return err
		}
		return f.listContainers()
	case "run":
		return f.runContainer(rest)
	case "delete", "rm": // Sources/ContainerCommands/Container/ContainerDelete.swift
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
	case "logs": // Sources/ContainerCommands/Container/ContainerLogs.swift
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

// listContainers prints [ManagedContainer]
// (Sources/ContainerResource/Container/ManagedContainer.swift: id,
// configuration, status), configuration a ContainerConfiguration
// (ContainerConfiguration.swift), status a ContainerStatus
// (ContainerStatus.swift: state, networks, startedDate), mounts
// Filesystems (Filesystem.swift: the type an enum with associated
// values), published sockets plain paths (PublishSocket.swift, 1.0.0 on).
func (f *fake) listContainers() error {
	out := []any{}
	for _, c := range sortedVMs(f.st.Containers) {
		state, started := "stopped", any(nil)
		if c.running() {
			state, started = "running", c.Created.Format(time.RFC3339)
		}
		mounts := []any{}
		for _, v := range c.Volumes {
			mounts = append(mounts, map[string]any{
				"type":   map[string]any{"volume": map[string]any{"name": v, "format": "ext4", "cache": map[string]any{"on": map[string]any{}}, "sync": map[string]any{"fsync": map[string]any{}}}},
				"source": "/Users/x/Library/Application Support/com.apple.container/volumes/" + v + "/volume.img", "destination": "/data", "options": []string{},
			})
		}
		socks := []any{}
		if c.Host != "" {
			socks = append(socks, map[string]any{"containerPath": c.Guest, "hostPath": c.Host})
		}
		out = append(out, map[string]any{"id": c.Name, "configuration": map[string]any{
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
			"resources":        map[string]any{"cpus": c.CPUs, "memoryInBytes": c.Memory, "cpuOverhead": 1},
			"runtimeHandler":   "container-runtime-linux",
			"virtualization":   false, "ssh": false, "readOnly": false, "useInit": false, "capAdd": []any{}, "capDrop": []any{},
			"creationDate": c.Created.Format(time.RFC3339),
		}, "status": map[string]any{"state": state, "networks": []any{}, "startedDate": started}})
	}
	return printJSON(out)
}

// normal is ClientImage.normalizeReference
// (Sources/Services/ContainerAPIService/Client/ClientImage.swift) with
// docker.io as the registry: a domain added, and library/ on docker.io.
func normal(ref string) string {
	if strings.Count(ref, "/") == 0 {
		return "docker.io/library/" + ref
	}
	if first := strings.Split(ref, "/")[0]; !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + ref
	}
	return ref
}

// findImage is ClientImage.get: an image stored under ref itself or
// under its normalized form.
func findImage(ims []image, ref string) (image, bool) {
	for _, im := range ims {
		if im.Reference == ref || im.Reference == normal(ref) {
			return im, true
		}
	}
	return image{}, false
}

func (f *fake) image(args []string) error {
	if len(args) == 0 {
		return usage("missing image subcommand")
	}
	switch args[0] {
	case "load":
		// Sources/ContainerCommands/Image/ImageLoad.swift: --input/-i (or
		// stdin), --force/-f; it prints each loaded reference.
		fl, pos, err := flags(args[1:], map[string]string{"--input=": "input", "-i=": "input", "--force": "force", "-f": "force"})
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usage("Unexpected argument '" + pos[0] + "'")
		}
		in := one(fl, "input")
		if in == "" {
			return usage("the fake loads only --input <path>")
		}
		if _, err := os.Stat(in); err != nil {
			return failure("file does not exist")
		}
		ims, err := readOCIArchive(in)
		if err != nil {
			return err
		}
		for _, im := range ims {
			f.st.Images = append(removeImage(f.st.Images, im.Reference), im)
			fmt.Println(im.Reference)
		}
		return nil
	case "list", "ls":
		// Sources/ContainerCommands/Image/ImageList.swift: [ImageResource]
		// (Sources/ContainerResource/Image/ImageResource.swift: id, the
		// digest's hex; configuration {creationDate, name, descriptor};
		// variants).
		if _, err := listFlags(args[1:], map[string]string{"--verbose": "v", "-v": "v"}); err != nil {
			return err
		}
		out := []any{}
		ims := append([]image(nil), f.st.Images...)
		sort.Slice(ims, func(i, j int) bool { return ims[i].Reference < ims[j].Reference })
		for _, im := range ims {
			out = append(out, map[string]any{
				"id": strings.TrimPrefix(im.Digest, "sha256:"),
				"configuration": map[string]any{"creationDate": "2026-12-01T00:00:00Z", "name": im.Reference,
					"descriptor": map[string]any{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": im.Digest, "size": 312}},
				"variants": []any{map[string]any{"platform": map[string]any{"os": "linux", "architecture": "arm64"}, "digest": im.Digest, "size": 1 << 20,
					"config": map[string]any{"architecture": "arm64", "os": "linux", "config": map[string]any{}, "rootfs": map[string]any{"type": "layers", "diff_ids": []any{}}}}},
			})
		}
		return printJSON(out)
	case "delete", "rm":
		// Sources/ContainerCommands/Image/ImageDelete.swift: --all/-a,
		// --force/-f (not found is no failure); it prints each reference.
		fl, pos, err := flags(args[1:], map[string]string{"--all": "all", "-a": "all", "--force": "force", "-f": "force"})
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			return failure("invalidArgument: \"no images specified and --all not supplied\"")
		}
		var failed []string
		for _, ref := range pos {
			im, ok := findImage(f.st.Images, ref)
			if !ok {
				if fl["force"] == nil {
					failed = append(failed, ref)
				}
				continue
			}
			for _, c := range f.st.Containers {
				if c.Image == im.Reference {
					return failure(fmt.Sprintf("invalidState: \"image %s is in use by container %s\"", ref, c.Name))
				}
			}
			f.st.Images = removeImage(f.st.Images, im.Reference)
			fmt.Println(im.Reference)
		}
		if len(failed) > 0 {
			return failure(fmt.Sprintf("internalError: \"failed to delete one or more images: %q\"", failed))
		}
		return nil
	}
	return usage("Unexpected argument '" + args[0] + "'")
}

// anonymousLabel marks an anonymous volume (VolumeConfiguration.swift).
const anonymousLabel = "com.apple.container.resource.anonymous"

func (f *fake) volume(args []string) error {
	if len(args) == 0 {
		return usage("missing volume subcommand")
	}
	switch args[0] {
	case "list", "ls":
		// Sources/ContainerCommands/Volume/VolumeList.swift:
		// [VolumeResource] (Sources/ContainerResource/Volume/
		// VolumeResource.swift: id, configuration), the configuration a
		// VolumeConfiguration (VolumeConfiguration.swift).
		if _, err := listFlags(args[1:], nil); err != nil {
			return err
		}
		out := []any{}
		for _, v := range f.st.Volumes {
			labels := v.Labels
			if labels == nil {
				labels = map[string]string{}
			}
			out = append(out, map[string]any{"id": v.Name, "configuration": map[string]any{"name": v.Name, "driver": "local", "format": "ext4",
				"source": "/x/" + v.Name + "/volume.img", "labels": labels, "options": map[string]any{}, "creationDate": "2026-12-01T00:00:00Z"}})
		}
		return printJSON(out)
	case "create":
		// Sources/ContainerCommands/Volume/VolumeCreate.swift: --label,
		// --opt, -s, a name (VolumeResource.nameValid).
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
		// Sources/ContainerCommands/Volume/VolumeDelete.swift: --all/-a
		// and names.
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

// hasCap reports whether caps (--cap-add or --cap-drop values) hold
// name, as Parser.capabilities normalizes them: upper case, CAP_ added,
// ALL as it is.
func hasCap(caps []string, name string) bool {
	for _, c := range caps {
		c = strings.ToUpper(c)
		if c != "ALL" && !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		if c == name {
			return true
		}
	}
	return false
}

// containerName is ManagedContainer.nameValid in 1.2.2.
var containerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// runContainer is Sources/ContainerCommands/Container/ContainerRun.swift
// with the flags of Flags.Process, Flags.Resource and Flags.Management
// the driver passes (Sources/Services/ContainerAPIService/Client/
// Flags.swift), checked as Utility.containerConfigFromFlags and Parser
// check them.
func (f *fake) runContainer(args []string) error {
	fl, pos, err := flags(args, map[string]string{
		"--detach": "detach", "-d": "detach", "--name=": "name", "--label=": "label", "-l=": "label",
		"--cpus=": "cpus", "-c=": "cpus", "--memory=": "memory", "-m=": "memory", "--network=": "network",
		"--publish-socket=": "publish-socket", "--rm": "rm", "--remove": "rm", "--cap-add=": "cap-add", "--cap-drop=": "cap-drop",
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
	if len(name) > 63 || !containerName.MatchString(name) {
		return failure(fmt.Sprintf("invalidArgument: \"container ID %s is not a valid container ID\"", name))
	}
	if f.findVM(f.st.Containers, name) >= 0 {
		return failure(fmt.Sprintf("exists: \"container with id %s already exists\"", name))
	}
	// Utility.swift: `none` (NetworkClient.noNetworkName) alone, no
	// interface at all.
	if nets := fl["network"]; len(nets) != 1 || nets[0] != "none" {
		return usage(fmt.Sprintf("the fake runs only --network none (got %q)", nets))
	}
	im, ok := findImage(f.st.Images, pos[0])
	if !ok {
		return failure(fmt.Sprintf("notFound: \"image %s not found\" (the fake does not pull)", pos[0]))
	}
	c, err := f.newVM(name, im.Reference, fl, 0)
	if err != nil {
		return err
	}
	root := c.Root
	if ps := one(fl, "publish-socket"); ps != "" {
		// Parser.publishSocket: host_path:container_path; a host path
		// that is a socket already is refused, anything else there is
		// removed.
		parts := strings.Split(ps, ":")
		if len(parts) != 2 || !filepath.IsAbs(parts[0]) || !filepath.IsAbs(parts[1]) {
			return failure(fmt.Sprintf("invalidArgument: \"invalid publish-socket spec %s\"", ps))
		}
		if fi, err := os.Lstat(parts[0]); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return failure(fmt.Sprintf("invalidArgument: \"host socket %s already exists and may be in use\"", parts[0]))
		}
		if _, err := os.Stat(filepath.Dir(parts[0])); err != nil {
			return failure(fmt.Sprintf("invalidArgument: publish socket host directory: %v", err))
		}
		c.Host, c.Guest = parts[0], parts[1]
	}
	if os.Getenv(AnonEnv) != "" {
		// Parser.volumes: `-v /path` makes an anonymous volume, named by
		// a lowercase UUID (VolumeConfiguration.generateAnonymousVolumeName)
		// and labelled anonymousLabel (Utility.getOrCreateVolume).
		b := make([]byte, 16)
		rand.Read(b)
		h := hex.EncodeToString(b)
		v := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		f.st.Volumes = append(f.st.Volumes, volume{Name: v, Labels: map[string]string{anonymousLabel: ""}})
		c.Volumes = append(c.Volumes, v)
	}
	argv := mapArgs(root, pos[1:])
	argv[0] = guestPath(root, pos[1])
	// RuntimeService.effectiveCapabilities (Sources/Services/RuntimeLinux/
	// Server/RuntimeService.swift): the OCI defaults, which lack
	// CAP_SYS_ADMIN, unless --cap-add says more. Without it nothing in the
	// guest can make a namespace or mount: the init fails as the
	// stand-in would.
	sysAdmin := (hasCap(fl["cap-add"], "ALL") || hasCap(fl["cap-add"], "CAP_SYS_ADMIN")) && !hasCap(fl["cap-drop"], "CAP_SYS_ADMIN")
	if !sysAdmin {
		argv = []string{"/bin/sh", "-c", "echo 'unshare: operation not permitted (the fake container: no CAP_SYS_ADMIN without --cap-add)' >&2; exit 1"}
	}
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
