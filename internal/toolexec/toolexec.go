// Package toolexec runs the command-line tools that the VM targets drive
// (Apple's `container`, microsandbox's `msb`): every command with a
// deadline, its stdout and stderr captured into the run directory, and a
// failure reported with the command line and the tool's own message. A
// Spec says which tool a target needs, and finds and checks it.
//
// It serves provision/apple and provision/microsandbox alike. Command
// (group.go) starts any child so that it dies with sealbench, with all it
// started: seal's builds use it.
package toolexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds one command when the Tool sets none.
const DefaultTimeout = 2 * time.Minute

// Tool is one command-line tool, found on PATH or named by path.
type Tool struct {
	// Path is the tool's absolute path (Find resolves it).
	Path string
	// LogDir, when set, receives each command's stdout and stderr as
	// NNN-<subcommand>-<pid>.out and .err; it is made (0700) on first
	// use, when its parent exists (otherwise nothing is kept).
	LogDir string
	// Timeout bounds each command (default DefaultTimeout).
	Timeout time.Duration
	// Log receives one line per command run; nil discards them.
	Log func(format string, args ...any)

	mu  sync.Mutex
	seq int
}

// ErrNotFound is what Find answers for a tool that is not installed.
var ErrNotFound = errors.New("tool not found")

// Find returns the absolute path of tool: a path as given, or a name
// looked up on PATH.
func Find(tool string) (string, error) {
	p, err := exec.LookPath(tool)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not on PATH (%v)", ErrNotFound, tool, err)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return abs, nil
}

// Error is a command that failed: it names the command line, where it
// ran, how it ended, and what the tool said.
type Error struct {
	Args     []string // the full command line, the tool first
	Host     string   // where it ran, when not on this host: ssh://user@host:port
	ExitCode int      // -1 when it did not exit by itself
	Stderr   string   // what the tool said (stderr, or stdout when stderr is empty), trimmed
	Err      error
	Logs     string // where its output was kept, if anywhere
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("`" + Quote(e.Args) + "`")
	if e.Host != "" {
		b.WriteString(" on " + e.Host)
	}
	fmt.Fprintf(&b, " failed: %v", e.Err)
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	if e.Logs != "" {
		fmt.Fprintf(&b, " (output in %s)", e.Logs)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Quote renders argv as a shell would need it typed.
func Quote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '=' || r == ':' || r == ',' || r == '+' || r == '@' ||
				(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Run runs the tool with args and returns its stdout.
func (t *Tool) Run(ctx context.Context, args ...string) ([]byte, error) {
	return t.RunTimeout(ctx, 0, args...)
}

// RunTimeout is Run with its own deadline (0: the Tool's).
func (t *Tool) RunTimeout(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	if timeout <= 0 {
		timeout = t.Timeout
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := append([]string{t.Path}, args...)
	cmd := exec.CommandContext(ctx, t.Path, args...)
	cmd.Stdin = nil
	// A tool that leaves a child holding its output open must not hold us
	// past the deadline.
	cmd.WaitDelay = 5 * time.Second
	out := NewOutput(t.logBase(args))
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out.Writers()
	if t.Log != nil {
		t.Log("running %s", Quote(argv))
	}
	start := time.Now()
	err := cmd.Run()
	if err == nil {
		return out.Stdout.Bytes(), nil
	}
	e := &Error{Args: argv, ExitCode: -1, Err: err, Logs: out.Base}
	var xe *exec.ExitError
	if errors.As(err, &xe) && xe.Exited() {
		e.ExitCode = xe.ExitCode()
	}
	if ctx.Err() == context.DeadlineExceeded {
		e.Err = fmt.Errorf("no answer within %s (%w)", time.Since(start).Round(time.Second), context.DeadlineExceeded)
	}
	e.Stderr = out.Said()
	return out.Stdout.Bytes(), e
}

// logBase picks the base name of one command's logs, or "" for none.
func (t *Tool) logBase(args []string) string {
	if t.LogDir == "" {
		return ""
	}
	t.mu.Lock()
	t.seq++
	n := t.seq
	t.mu.Unlock()
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 2 {
			break
		}
		words = append(words, a)
	}
	return LogBase(t.LogDir, fmt.Sprintf("%03d-%s-%d", n, strings.Join(words, "-"), os.Getpid()))
}

// LogBase is the base name of a command's logs in dir: dir/name, or ""
// (keep nothing) when dir is "" or cannot be made. Only dir's last
// element is made (0700): a target directory torn down must not come
// back because a command ran after.
func LogBase(dir, name string) string {
	if dir == "" {
		return ""
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return ""
	}
	return filepath.Join(dir, name)
}

// Output captures a command's stdout and stderr and, when Base is set,
// keeps them as they come in Base.out and Base.err (0600).
type Output struct {
	Stdout, Stderr bytes.Buffer
	Base           string // "" when nothing is kept
	files          []*os.File
}

// NewOutput captures into buffers, and into base's files when base is
// not "" (a file that cannot be made is left out).
func NewOutput(base string) *Output { return &Output{Base: base} }

// Writers returns the command's stdout and stderr.
func (o *Output) Writers() (stdout, stderr io.Writer) {
	tee := func(buf *bytes.Buffer, ext string) io.Writer {
		if o.Base == "" {
			return buf
		}
		f, err := os.OpenFile(o.Base+ext, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return buf
		}
		o.files = append(o.files, f)
		return io.MultiWriter(buf, f)
	}
	return tee(&o.Stdout, ".out"), tee(&o.Stderr, ".err")
}

// Close closes the kept files.
func (o *Output) Close() {
	for _, f := range o.files {
		f.Close()
	}
	o.files = nil
}

// Said is what the command said, for an error: its stderr, or its stdout
// when stderr is empty, trimmed, at most its last 2000 bytes.
func (o *Output) Said() string {
	msg := strings.TrimSpace(o.Stderr.String())
	if msg == "" {
		msg = strings.TrimSpace(o.Stdout.String())
	}
	if len(msg) > 2000 {
		msg = "..." + msg[len(msg)-2000:]
	}
	return msg
}

var versionPattern = regexp.MustCompile(`\b(\d+)\.(\d+)\.(\d+)`)

// Version is a tool's release: major, minor, patch.
type Version [3]int

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

// ParseVersion finds the first x.y.z in a tool's --version output.
func ParseVersion(out string) (Version, error) {
	m := versionPattern.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("no version number in %q", strings.TrimSpace(out))
	}
	var v Version
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, nil
}

// MustVersion parses a version written in the code.
func MustVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// JSON runs the tool with args and decodes its stdout, JSON, into v.
func (t *Tool) JSON(ctx context.Context, v any, args ...string) error {
	out, err := t.Run(ctx, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("reading the output of `%s`: %w (output: %.200q)", Quote(append([]string{t.Path}, args...)), err, out)
	}
	return nil
}

// Spec says which tool a target drives and which releases: [Min, Max],
// Max being the newest release whose sources its command lines and JSON
// shapes were checked against. What Find and CheckVersion answer wraps
// the target's own sentinel errors, so that the CLI tells a missing tool
// from an old or an untested one with errors.Is.
type Spec struct {
	Default string  // its name on PATH
	Min     Version // the oldest release driven
	MinWhy  string  // what Min brings, for the message: "for --network none"; may be empty
	// Max is the newest release checked; a newer one is refused
	// (ErrUntested) unless the caller allows untested tools, and then it
	// gets a warning naming the range. Zero: no upper bound.
	Max Version
	// Checked says against what the range was checked, for the messages:
	// "apple/container's sources at 1.0.0 and 1.2.2".
	Checked string
	Install string // how to install it: "install it from https://..."
	Upgrade string // how to upgrade it: "upgrade from https://..."
	// ErrMissing, ErrTooOld and ErrUntested are the target's sentinels.
	ErrMissing, ErrTooOld, ErrUntested error
}

// AllowUntestedFlag is the command-line flag that lets a target drive a
// release newer than its Spec's Max.
const AllowUntestedFlag = "--allow-untested-tool"

// Range is the releases the Spec drives: "1.0.0 to 1.2.2", or "1.0.0 or
// newer" without a Max.
func (s Spec) Range() string {
	if s.Max == (Version{}) {
		return s.Min.String() + " or newer"
	}
	return s.Min.String() + " to " + s.Max.String()
}

// checked is the range with what it was checked against.
func (s Spec) checked() string {
	if s.Checked == "" {
		return s.Range()
	}
	return s.Range() + ", checked against " + s.Checked
}

// Find returns the tool's absolute path: tool is a path or a name on
// PATH, empty meaning Default. A missing tool is ErrMissing, with Install.
func (s Spec) Find(tool string) (string, error) {
	if tool == "" {
		tool = s.Default
	}
	p, err := Find(tool)
	if err != nil {
		return "", fmt.Errorf("%w: %v; %s", s.ErrMissing, err, s.Install)
	}
	return p, nil
}

// CheckVersion runs `<tool> --version` and checks the release against
// the range: older than Min is ErrTooOld; newer than Max is ErrUntested,
// unless allowUntested, when it is warning instead (for the caller to
// log), naming the range. It returns the release it found.
func (s Spec) CheckVersion(ctx context.Context, t *Tool, allowUntested bool) (v Version, warning string, err error) {
	out, err := t.Run(ctx, "--version")
	if err != nil {
		return v, "", fmt.Errorf("%w: %v", s.ErrMissing, err)
	}
	v, err = ParseVersion(string(out))
	if err != nil {
		return v, "", fmt.Errorf("%s --version: %w", t.Path, err)
	}
	if v.Less(s.Min) {
		why := ""
		if s.MinWhy != "" {
			why = " (" + s.MinWhy + ")"
		}
		return v, "", fmt.Errorf("%w: %s is %s, sealbench needs %s or newer%s (it drives %s); %s", s.ErrTooOld, t.Path, v, s.Min, why, s.checked(), s.Upgrade)
	}
	if s.Max != (Version{}) && s.Max.Less(v) {
		if allowUntested {
			return v, fmt.Sprintf("%s is %s, newer than the releases sealbench drives (%s): going on because of %s; its commands or JSON may have changed", t.Path, v, s.checked(), AllowUntestedFlag), nil
		}
		return v, "", fmt.Errorf("%w: %s is %s, newer than the releases sealbench drives (%s); pass %s to drive it anyway, or install a release in that range", s.ErrUntested, t.Path, v, s.checked(), AllowUntestedFlag)
	}
	return v, "", nil
}

// Check finds tool (as Find) and checks its version (as CheckVersion,
// refusing an untested release).
func (s Spec) Check(ctx context.Context, tool string) (*Tool, Version, error) {
	p, err := s.Find(tool)
	if err != nil {
		return nil, Version{}, err
	}
	t := &Tool{Path: p}
	v, _, err := s.CheckVersion(ctx, t, false)
	return t, v, err
}
