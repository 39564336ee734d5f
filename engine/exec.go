package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// Execer runs commands in running containers with the Engine API's three
// exec calls, as the official client makes them (create; start, its
// stream on a connection of its own, hijacked; inspect), on plain HTTP
// over the client's own dialer (unix, tcp, TLS, or whatever helper the
// client was made with). The official client wraps every request in
// OpenTelemetry's transport, whatever the caller asks: in a runner that
// execs thousands of times, and whose per-exec overhead is one of the
// figures it reports, that is work the Engine's answer waits for.
//
// Its create and inspect go on connections it keeps, each request
// written and its answer read by the calling goroutine: a Transport's
// reading and writing goroutines would add two hand-offs to each.
type Execer struct {
	dial   func(context.Context) (net.Conn, error)
	prefix string // "/v1.47": the API version the client negotiated

	mu   sync.Mutex
	idle []*keptConn
}

// keptConn is a connection between requests, with its reader.
type keptConn struct {
	net.Conn
	br *bufio.Reader
}

// maxKeptConns bounds the idle connections an Execer keeps.
const maxKeptConns = 2

// NewExecer returns an Execer for cli's Engine, at the API version cli
// negotiates with it (it asks the Engine once, now).
func NewExecer(ctx context.Context, cli *client.Client) *Execer {
	cli.NegotiateAPIVersion(ctx)
	dial := cli.Dialer()
	prefix := ""
	if v := cli.ClientVersion(); v != "" {
		prefix = "/v" + strings.TrimPrefix(v, "v")
	}
	return &Execer{dial: dial, prefix: prefix}
}

// Close closes the Execer's idle connections.
func (x *Execer) Close() {
	x.mu.Lock()
	idle := x.idle
	x.idle = nil
	x.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// ExecResult is how an exec ended, as the Engine's inspect tells it.
type ExecResult struct {
	ExitCode int
	// Pid is the process's pid in its container; 0 when the Engine never
	// started it.
	Pid     int
	Running bool
}

// Exec runs opts in container id, copying stdin (when not nil) to the
// process and its output, demultiplexed, to stdout and stderr, until the
// process ends; it returns how the process ended. opts.Tty is refused: the
// stream is read as stdout and stderr multiplexed. Cancelling ctx closes
// the stream.
func (x *Execer) Exec(ctx context.Context, id string, opts container.ExecOptions, stdin io.Reader, stdout, stderr io.Writer) (ExecResult, error) {
	if opts.Tty {
		return ExecResult{}, errors.New("Execer does not run execs with a TTY")
	}
	opts.AttachStdin = stdin != nil
	// The stream's connection is dialled while the exec is created: the
	// Engine accepts it as it answers the create.
	type dialed struct {
		c   net.Conn
		err error
	}
	dc := make(chan dialed, 1)
	go func() {
		c, err := x.dial(ctx)
		dc <- dialed{c, err}
	}()
	var created container.ExecCreateResponse
	if err := x.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/exec", opts, &created); err != nil {
		if d := <-dc; d.c != nil {
			d.c.Close()
		}
		return ExecResult{}, err
	}
	d := <-dc
	if d.err != nil {
		return ExecResult{}, fmt.Errorf("POST /exec/%s/start: %w", created.ID, d.err)
	}
	if err := x.stream(ctx, d.c, created.ID, stdin, stdout, stderr); err != nil {
		return ExecResult{}, err
	}
	var insp container.ExecInspect
	if err := x.call(ctx, http.MethodGet, "/exec/"+url.PathEscape(created.ID)+"/json", nil, &insp); err != nil {
		return ExecResult{}, err
	}
	return ExecResult{ExitCode: insp.ExitCode, Pid: insp.Pid, Running: insp.Running}, nil
}

// call makes one request on a kept connection: in, when not nil, as its
// JSON body; the answer's JSON body into out. A kept connection the Engine
// closed while it was idle fails before any answer: the request is made
// again once on a new one. (A create the Engine did take is then made
// twice; the first exec is never started, which an Engine keeps as it
// keeps any other.)
func (x *Execer) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	for try := 0; ; try++ {
		c, kept, err := x.conn(ctx, try > 0)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		answered, err := x.roundTrip(ctx, c, method, path, body, out)
		if err != nil && kept && !answered && try == 0 && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// conn is an idle kept connection, or a new one (always when fresh).
func (x *Execer) conn(ctx context.Context, fresh bool) (c *keptConn, kept bool, err error) {
	if !fresh {
		x.mu.Lock()
		if n := len(x.idle); n > 0 {
			c = x.idle[n-1]
			x.idle = x.idle[:n-1]
		}
		x.mu.Unlock()
		if c != nil {
			return c, true, nil
		}
	}
	nc, err := x.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	return &keptConn{Conn: nc, br: bufio.NewReader(nc)}, false, nil
}

// keep puts c back among the idle connections, or closes it.
func (x *Execer) keep(c *keptConn) {
	x.mu.Lock()
	if len(x.idle) < maxKeptConns {
		x.idle = append(x.idle, c)
		c = nil
	}
	x.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// roundTrip makes one request on c, and keeps c for the next when the
// answer leaves it usable. answered says whether any of the answer came.
func (x *Execer) roundTrip(ctx context.Context, c *keptConn, method, path string, body []byte, out any) (answered bool, err error) {
	fail := func(err error) (bool, error) {
		c.Close()
		return answered, fmt.Errorf("%s %s: %w", method, path, ctxErr(ctx, err))
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+x.prefix+path, bytes.NewReader(body))
	if err != nil {
		c.Close()
		return false, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Body, req.ContentLength = nil, 0
	}
	if err := req.Write(c); err != nil {
		return fail(err)
	}
	if _, err := c.br.Peek(1); err != nil {
		return fail(err)
	}
	answered = true
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode/100 != 2 {
		err = answerError(method, path, resp)
	} else if derr := json.NewDecoder(resp.Body).Decode(out); derr != nil {
		err = fmt.Errorf("%s %s: reading the answer: %w", method, path, derr)
	}
	if _, derr := io.Copy(io.Discard, resp.Body); derr != nil || resp.Close || !stop() {
		resp.Body.Close()
		c.Close()
		return answered, err
	}
	resp.Body.Close()
	x.keep(c)
	return answered, err
}

// stream starts exec eid on conn, a connection of its own, upgraded to
// the raw stream, and copies until the Engine closes it; it closes conn.
func (x *Execer) stream(ctx context.Context, conn net.Conn, eid string, stdin io.Reader, stdout, stderr io.Writer) error {
	path := "/exec/" + url.PathEscape(eid) + "/start"
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	body := []byte(`{"Detach":false,"Tty":false}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker"+x.prefix+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("POST %s: %w", path, ctxErr(ctx, err))
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(conn)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, ctxErr(ctx, err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return answerError(http.MethodPost, path, resp)
	}
	if stdin != nil {
		go func() {
			io.Copy(conn, stdin)
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		}()
	}
	if err := demux(stdout, stderr, br); err != nil {
		return fmt.Errorf("POST %s: reading the stream: %w", path, ctxErr(ctx, err))
	}
	return ctx.Err()
}

// readers buffer the streams: a runner execs thousands of times.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// demux copies the Engine's multiplexed stream to stdout and stderr until
// it ends: frames of an 8-byte header (the stream: 0 stdin, echoed, or 1
// stdout, 2 stderr, 3 the Engine's own error; then 3 zero bytes and the
// length, big-endian) and that many bytes. It copies each frame straight
// from r's buffer, as stdcopy.StdCopy does through a buffer of its own.
func demux(stdout, stderr io.Writer, r *bufio.Reader) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		n := int(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer
		switch hdr[0] {
		case 0, 1:
			w = stdout
		case 2:
			w = stderr
		case 3:
			msg := make([]byte, min(n, 64<<10))
			io.ReadFull(r, msg)
			return fmt.Errorf("error from the Engine in the stream: %s", msg)
		default:
			return fmt.Errorf("unrecognized stream %d in the Engine's multiplexed stream", hdr[0])
		}
		for n > 0 {
			b, err := r.Peek(min(n, r.Size()))
			if len(b) > 0 {
				if _, werr := w.Write(b); werr != nil {
					return werr
				}
				r.Discard(len(b))
				n -= len(b)
			}
			if err != nil && len(b) == 0 {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
	}
}

// answerError is the error an Engine's non-success answer carries:
// {"message": ...} as the Engine API writes it, else its status.
func answerError(method, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &AnswerError{Status: resp.StatusCode, Call: method + " " + path, Message: msg}
}

// AnswerError is an Engine's refusal of a call.
type AnswerError struct {
	Status  int    // the HTTP status: 404 no such container or exec, 409 not running
	Call    string // "POST /containers/ID/exec"
	Message string // the Engine's own words
}

func (e *AnswerError) Error() string {
	return fmt.Sprintf("Error response from daemon: %s (%d on %s)", e.Message, e.Status, e.Call)
}

// ctxErr is ctx's error when ctx ended (the connection was closed because
// it did), else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
