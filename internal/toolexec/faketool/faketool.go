// Package faketool is a faithful stand-in, for tests, for the tools the VM
// targets drive: Apple's `container` (as of apple/container 1.2.2) and
// microsandbox's `msb` (as of superradcompany/microsandbox v0.6.14);
// container.go and msb.go name the source files each answer follows. A test
// binary calls Main first thing in TestMain; Install puts links named
// after the tools, pointing at the test binary, in a directory for PATH.
// Run under those names, the binary is the fake: it checks the exact
// arguments it gets (an unknown flag or a missing one fails as the real
// tool's argument parser would), keeps its state (containers, sandboxes,
// images, volumes) in a directory, answers in the real tools' JSON shapes,
// and runs the "VM's" init for real: the stand-in from the bundle, as a
// host process, with the guest's paths mapped into a directory per VM
// (the image's /opt/sealbench is the bundle directory OptEnv names).
// `container run --publish-socket` gets a relay process, as the real tool
// forwards the guest socket to the host.
//
// It only works on Linux (it reads /proc); it is test code.
package faketool

import (
	"archive/tar"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// Environment of the fake tools.
const (
	StateEnv   = "SEALBENCH_FAKETOOL_STATE"    // its state directory (required)
	OptEnv     = "SEALBENCH_FAKETOOL_OPT"      // the host directory that is the image's /opt/sealbench
	FailEnv    = "SEALBENCH_FAKETOOL_FAIL"     // "<tool> <subcommand>": that command fails, as the tool would
	VersionEnv = "SEALBENCH_FAKETOOL_VERSION"  // the version --version prints
	AnonEnv    = "SEALBENCH_FAKETOOL_ANON"     // set: `container run` also makes an anonymous volume, as -v /path would
	relayEnv   = "SEALBENCH_FAKETOOL_RELAY"    // internal: run as a socket relay from this host path...
	relayTo    = "SEALBENCH_FAKETOOL_RELAY_TO" // ...to this one
)

// Tools the fake can be.
const (
	Container = "container"
	Msb       = "msb"
)

// Install links dir/tool to the running binary, for each tool.
func Install(dir string, tools ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, t := range tools {
		if err := os.Symlink(self, filepath.Join(dir, t)); err != nil {
			return err
		}
	}
	return nil
}

// Main runs the fake and exits when the binary was started as one of the
// tools (or as a relay); otherwise it returns at once.
func Main() {
	if host := os.Getenv(relayEnv); host != "" {
		relay(host, os.Getenv(relayTo))
		os.Exit(0)
	}
	switch filepath.Base(os.Args[0]) {
	case Container:
		os.Exit(run(Container, os.Args[1:], containerCmd))
	case Msb:
		os.Exit(run(Msb, os.Args[1:], msbCmd))
	}
}

// usage is a command-line error: exit 64, as swift-argument-parser and
// clap's usage errors (clap exits 2; the provisioners only look at non-zero).
type usage string

func (u usage) Error() string { return string(u) }

// failure is the tool's own error: exit 1.
type failure string

func (f failure) Error() string { return string(f) }

func run(tool string, args []string, f func(*fake, []string) error) int {
	dir := os.Getenv(StateEnv)
	if dir == "" {
		fmt.Fprintf(os.Stderr, "fake %s: %s is not set\n", tool, StateEnv)
		return 70
	}
	fk := &fake{tool: tool, dir: dir}
	fk.logCall(args)
	if fail := os.Getenv(FailEnv); fail != "" && strings.HasPrefix(tool+" "+strings.Join(args, " "), fail) {
		fmt.Fprintf(os.Stderr, "Error: internalError: %q failed (injected)\n", fail)
		return 1
	}
	unlock := fk.lock()
	defer unlock()
	if err := fk.load(); err != nil {
		fmt.Fprintf(os.Stderr, "fake %s: %v\n", tool, err)
		return 70
	}
	err := f(fk, args)
	if serr := fk.save(); serr != nil && err == nil {
		err = serr
	}
	switch err.(type) {
	case nil:
		return 0
	case usage:
		fmt.Fprintf(os.Stderr, "Error: %v\nUsage: %s ...\n", err, tool)
		return 64
	default:
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		return 1
	}
}

// fake is one invocation of a fake tool, with the shared state.
type fake struct {
	tool     string
	dir      string
	st       state
	lf       *os.File
	released bool // the lock was given up: the state is not saved
}

type state struct {
	SystemStopped bool     `json:"systemStopped"`
	Containers    []*vm    `json:"containers"`
	Images        []image  `json:"images"`
	Volumes       []volume `json:"volumes"`
	Sandboxes     []*vm    `json:"sandboxes"`
	MsbImages     []image  `json:"msbImages"`
}

// vm is a container (apple) or a sandbox (msb).
type vm struct {
	Name    string            `json:"name"`
	Image   string            `json:"image"`
	Labels  map[string]string `json:"labels"`
	CPUs    int               `json:"cpus"`
	Memory  uint64            `json:"memory"`
	Root    string            `json:"root"` // the guest's writable paths live here
	Pids    []int             `json:"pids"` // init and relay
	Host    string            `json:"host,omitempty"`
	Guest   string            `json:"guest,omitempty"`
	Volumes []string          `json:"volumes,omitempty"`
	Created time.Time         `json:"created"`
}

type image struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"` // the manifest's
	Config    string `json:"config"` // the image id
}

type volume struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

func (f *fake) logCall(args []string) {
	b, _ := json.Marshal(append([]string{f.tool}, args...))
	if lf, err := os.OpenFile(filepath.Join(f.dir, "calls.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		lf.Write(append(b, '\n'))
		lf.Close()
	}
}

// Calls returns every command line the fakes ran in state directory dir,
// the tool first.
func Calls(dir string) ([][]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "calls.jsonl"))
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var c []string
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// StopSystem makes `container system status` fail, as when the service
// is not running, until `container system start`.
func StopSystem(dir string) error {
	f := &fake{dir: dir}
	unlock := f.lock()
	defer unlock()
	if err := f.load(); err != nil {
		return err
	}
	f.st.SystemStopped = true
	return f.save()
}

func (f *fake) lock() func() {
	lf, err := os.OpenFile(filepath.Join(f.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}
	}
	syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
	f.lf = lf
	return func() { lf.Close() }
}

// unlockEarly gives the lock up for a long command that changes nothing.
func (f *fake) unlockEarly() {
	f.released = true
	if f.lf != nil {
		f.lf.Close()
	}
}

func (f *fake) load() error {
	b, err := os.ReadFile(filepath.Join(f.dir, "state.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, &f.st)
}

func (f *fake) save() error {
	if f.released {
		return nil
	}
	b, err := json.MarshalIndent(&f.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(f.dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(f.dir, "state.json"))
}

// flags parses args strictly: spec maps each accepted flag (long and
// short spellings, with a trailing "=" when it takes a value) to its
// canonical name (a "*" entry lets flags and arguments mix, as clap
// does);
// the first argument that is not a flag ends the flags (or "--" does).
func flags(args []string, spec map[string]string) (map[string][]string, []string, error) {
	got := map[string][]string{}
	_, anywhere := spec["*"]
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return got, append(pos, args[i+1:]...), nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if anywhere {
				pos = append(pos, a)
				continue
			}
			return got, args[i:], nil
		}
		name, val, hasVal := strings.Cut(a, "=")
		canon, ok := spec[name]
		takesValue := false
		if !ok {
			canon, ok = spec[name+"="]
			takesValue = true
		}
		if !ok {
			return nil, nil, usage(fmt.Sprintf("Unknown option '%s'", name))
		}
		switch {
		case takesValue && !hasVal:
			if i+1 >= len(args) {
				return nil, nil, usage(fmt.Sprintf("Missing value for '%s'", name))
			}
			i++
			val = args[i]
		case !takesValue && hasVal:
			return nil, nil, usage(fmt.Sprintf("'%s' takes no value", name))
		}
		got[canon] = append(got[canon], val)
	}
	return got, pos, nil
}

func one(fl map[string][]string, name string) string {
	if v := fl[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// readDockerSave reads the references and digests of a `docker save` tar.
func readDockerSave(p string) ([]image, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, failure(fmt.Sprintf("notFound: %q: %v", p, err))
	}
	defer fh.Close()
	tr := tar.NewReader(fh)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, failure(fmt.Sprintf("invalidArgument: %s holds no manifest.json", p))
		}
		if err != nil {
			return nil, failure(fmt.Sprintf("invalidArgument: reading %s: %v", p, err))
		}
		if h.Name != "manifest.json" {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		var m []struct {
			Config   string
			RepoTags []string
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, failure("invalidArgument: bad manifest.json: " + err.Error())
		}
		sum := sha256.Sum256(b)
		var out []image
		for _, e := range m {
			cfg := "sha256:" + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(e.Config), "sha256:"), ".json")
			for _, t := range e.RepoTags {
				out = append(out, image{Reference: t, Digest: "sha256:" + hex.EncodeToString(sum[:]), Config: cfg})
			}
		}
		return out, nil
	}
}

// readOCIArchive reads the images of an OCI image layout archive as
// `container image load` does: apple/container 1.2.2's ImagesService.load
// (Sources/Services/ContainerImagesService/Server/ImagesService.swift)
// extracts it and hands the directory to containerization 0.40.1's
// ImageStore.load(from:) (Sources/Containerization/Image/ImageStore/
// ImageStore+OCILayout.swift), which needs oci-layout (with
// imageLayoutVersion) and index.json (LocalOCILayoutClient.
// loadIndexFromOCILayout), names each image by its descriptor's
// annotations (getImageReferencefromDescriptor) and imports every blob the
// manifest names. A `docker save` archive without them is refused.
func readOCIArchive(p string) ([]image, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, failure(fmt.Sprintf("notFound: %q: %v", p, err))
	}
	defer fh.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(fh)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, failure(fmt.Sprintf("invalidArgument: reading %s: %v", p, err))
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[filepath.Clean(h.Name)] = b
	}
	const dir = "/var/folders/xx/T/C6B0A5E2-0000-4000-8000-000000000000" // where the tool extracts it
	var layout map[string]string
	lb, ok := files["oci-layout"]
	if !ok {
		return nil, failure(fmt.Sprintf("notFound: %q", dir+"/oci-layout"))
	}
	if err := json.Unmarshal(lb, &layout); err != nil || layout["imageLayoutVersion"] == "" {
		return nil, failure(fmt.Sprintf("empty: \"missing key imageLayoutVersion in %s/oci-layout\"", dir))
	}
	ib, ok := files["index.json"]
	if !ok {
		return nil, failure(fmt.Sprintf("notFound: %q", dir+"/index.json"))
	}
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
	}
	var index struct {
		Manifests []desc `json:"manifests"`
	}
	if err := json.Unmarshal(ib, &index); err != nil {
		return nil, failure("internalError: index.json: " + err.Error())
	}
	blob := func(d desc) ([]byte, error) {
		hexd, ok := strings.CutPrefix(d.Digest, "sha256:")
		b, found := files["blobs/sha256/"+hexd]
		if !ok || !found {
			return nil, failure(fmt.Sprintf("notFound: \"content with digest %s\"", d.Digest))
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != hexd || int64(len(b)) != d.Size {
			return nil, failure(fmt.Sprintf("internalError: \"digest or size mismatch for %s\"", d.Digest))
		}
		return b, nil
	}
	var out []image
	for _, m := range index.Manifests {
		ref := ""
		for _, k := range []string{"com.apple.containerization.image.name", "io.containerd.image.name", "org.opencontainers.image.ref.name"} {
			if ref = m.Annotations[k]; ref != "" {
				break
			}
		}
		if ref == "" {
			return nil, failure("invalidArgument: \"cannot parse image reference\"")
		}
		if m.MediaType != "application/vnd.oci.image.manifest.v1+json" && m.MediaType != "application/vnd.docker.distribution.manifest.v2+json" {
			return nil, failure("internalError: the fake loads only manifests, not " + m.MediaType)
		}
		mb, err := blob(m)
		if err != nil {
			return nil, err
		}
		var man struct {
			Config desc   `json:"config"`
			Layers []desc `json:"layers"`
		}
		if err := json.Unmarshal(mb, &man); err != nil {
			return nil, failure("internalError: manifest: " + err.Error())
		}
		for _, d := range append([]desc{man.Config}, man.Layers...) {
			if _, err := blob(d); err != nil {
				return nil, err
			}
		}
		out = append(out, image{Reference: ref, Digest: m.Digest, Config: man.Config.Digest})
	}
	if len(out) == 0 {
		return nil, failure("internalError: \"failed to import image\"")
	}
	return out, nil
}

// guestPath maps a path inside the VM onto the host.
func guestPath(root, p string) string {
	if rest, ok := strings.CutPrefix(p, manifests.SandboxBundleDir+"/"); ok {
		return filepath.Join(os.Getenv(OptEnv), rest)
	}
	return filepath.Join(root, p)
}

// scriptPath is a guest path in a shell script: after a space or a
// redirection, in a directory the VM's root holds.
var scriptPath = regexp.MustCompile(`(^|[ <>])(/run/|/var/|/tmp/)`)

// mapArgs maps every absolute argument, and the paths in a `sh -c` script.
func mapArgs(root string, argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case i > 0 && len(argv) > 2 && argv[0] == "/bin/sh" && argv[i-1] == "-c":
			a = scriptPath.ReplaceAllString(a, "${1}"+root+"${2}")
			a = strings.ReplaceAll(a, manifests.SandboxBundleDir+"/", os.Getenv(OptEnv)+"/")
		case i > 0 && strings.HasPrefix(a, "/"):
			a = guestPath(root, a)
		}
		out[i] = a
	}
	return out
}

func newRoot(dir string) (string, error) {
	var b [4]byte
	rand.Read(b[:])
	root := filepath.Join(dir, "vm", hex.EncodeToString(b[:]))
	for _, d := range []string{"run", "var", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	return root, nil
}

// startDetached starts argv in a session of its own, its output in log.
func startDetached(argv []string, env []string, log string) (int, error) {
	lf, err := os.OpenFile(log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer lf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, failure(fmt.Sprintf("internalError: starting %s: %v", argv[0], err))
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return pid, nil
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// procsUnder lists the live processes with an argument under root.
func procsUnder(root string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if strings.HasPrefix(a, root+"/") {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// stop ends a VM: SIGTERM to its processes, SIGKILL after 10s, then its
// root goes.
func (v *vm) stop() error {
	pids := append(append([]int(nil), v.Pids...), procsUnder(v.Root)...)
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range pids {
		for alive(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(p) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if v.Host != "" {
		os.Remove(v.Host)
	}
	if err := os.RemoveAll(v.Root); err != nil {
		return failure(fmt.Sprintf("internalError: removing %s: %v", v.Root, err))
	}
	return nil
}

func (v *vm) running() bool {
	return len(v.Pids) > 0 && alive(v.Pids[0])
}

// relay forwards every connection to host on to guest, as the real tool
// publishes a guest socket, until SIGTERM.
func relay(host, guest string) {
	os.Remove(host)
	ln, err := net.Listen("unix", host)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relay: %v\n", err)
		os.Exit(1)
	}
	os.Chmod(host, 0o600)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Remove(host)
			return
		}
		go func() {
			defer c.Close()
			g, err := net.Dial("unix", guest)
			if err != nil {
				return
			}
			defer g.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(g, c); g.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
			go func() { io.Copy(c, g); c.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func parseLabels(ls []string) (map[string]string, error) {
	m := map[string]string{}
	for _, l := range ls {
		k, v, _ := strings.Cut(l, "=")
		if k == "" {
			return nil, usage(fmt.Sprintf("bad label %q", l))
		}
		m[k] = v
	}
	return m, nil
}

func sortedVMs(vs []*vm) []*vm {
	out := append([]*vm(nil), vs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// printVersion prints format with the version VersionEnv names, or def.
func printVersion(format, def string) {
	v := os.Getenv(VersionEnv)
	if v == "" {
		v = def
	}
	fmt.Printf(format, v)
}

// listFlags parses a list command's flags: --format json (the only format
// the fake prints), --quiet, and the command's own; it takes no argument.
func listFlags(args []string, own map[string]string) (map[string][]string, error) {
	spec := map[string]string{"--format=": "format", "--quiet": "q", "-q": "q"}
	for k, v := range own {
		spec[k] = v
	}
	fl, pos, err := flags(args, spec)
	switch {
	case err != nil:
		return nil, err
	case len(pos) > 0:
		return nil, usage("Unexpected argument '" + pos[0] + "'")
	case one(fl, "format") != "json":
		return nil, usage("the fake lists only --format json")
	}
	return fl, nil
}

// newVM makes the VM name of image ref, sized and labelled by the flags
// --cpus (1 to maxCPUs; 0: no bound), --memory (<MiB>M) and --label, with
// a root of its own.
func (f *fake) newVM(name, ref string, fl map[string][]string, maxCPUs int) (*vm, error) {
	cpus, err := strconv.Atoi(one(fl, "cpus"))
	if err != nil || cpus < 1 || (maxCPUs > 0 && cpus > maxCPUs) {
		return nil, usage(fmt.Sprintf("invalid value '%s' for '--cpus <CPUS>'", one(fl, "cpus")))
	}
	mem := one(fl, "memory")
	mib, err := strconv.ParseUint(strings.TrimSuffix(mem, "M"), 10, 64)
	if err != nil || !strings.HasSuffix(mem, "M") {
		return nil, usage(fmt.Sprintf("bad --memory %q (the fake takes <MiB>M)", mem))
	}
	labels, err := parseLabels(fl["label"])
	if err != nil {
		return nil, err
	}
	root, err := newRoot(f.dir)
	if err != nil {
		return nil, err
	}
	return &vm{Name: name, Image: ref, Labels: labels, CPUs: cpus, Memory: mib << 20, Root: root, Created: time.Now().UTC()}, nil
}

// hasImage reports whether ims hold ref.
func hasImage(ims []image, ref string) bool {
	for _, im := range ims {
		if im.Reference == ref {
			return true
		}
	}
	return false
}

func removeImage(ims []image, ref string) []image {
	var out []image
	for _, im := range ims {
		if im.Reference != ref {
			out = append(out, im)
		}
	}
	return out
}
