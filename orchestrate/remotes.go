package orchestrate

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx"
)

// hostConns are a run's SSH connections, one per remote host, shared by
// every target of the run there; each host is recorded in the run's
// hosts.json before it is first connected to, so that a later teardown
// reaches it the same way.
type hostConns struct {
	run   *runs.Run
	ssh   SSH
	logf  func(string, ...any)
	mu    sync.Mutex
	conns map[string]*sshx.Client
}

func newHostConns(run *runs.Run, ssh SSH, logf func(string, ...any)) *hostConns {
	return &hostConns{run: run, ssh: ssh, logf: logf, conns: map[string]*sshx.Client{}}
}

// get returns the run's connection to h, making it first.
func (p *hostConns) get(ctx context.Context, h *remote.Host) (*sshx.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := h.String()
	if c := p.conns[key]; c != nil {
		if c.Err() == nil {
			return c, nil
		}
		c.Close()
	}
	rec := runs.HostRecord{Host: key}
	if h.Alias != h.Host {
		// Later connections (teardown, the audit) read ssh_config for it too.
		rec.Alias = h.Alias
	}
	var err error
	for _, f := range []struct {
		in  string
		out *string
	}{{p.ssh.KnownHosts, &rec.KnownHosts}, {p.ssh.Identity, &rec.Identity}} {
		if f.in != "" {
			if *f.out, err = filepath.Abs(f.in); err != nil {
				return nil, err
			}
		}
	}
	if err := runs.RecordHost(p.run.Dir, rec); err != nil {
		return nil, fmt.Errorf("recording %s in the run's %s: %w", key, runs.HostsFile, err)
	}
	// And in the state directory's, which outlives the run (the audit's).
	if err := runs.RecordHostUse(p.run.StateDir(), p.run.ID, rec); err != nil {
		return nil, err
	}
	o := p.ssh.options()
	o.Log = p.logf
	// Every command's output, kept in the run directory while it lasts.
	o.LogDir = filepath.Join(p.run.Dir, "logs", "ssh", strings.NewReplacer("ssh://", "", "@", "-", ":", "-", "[", "", "]", "").Replace(key))
	c, err := h.Dial(ctx, o)
	if err != nil {
		return nil, err
	}
	p.conns[key] = c
	return c, nil
}

// close closes every connection: after teardown, which may still reach
// the hosts' Engines through forwards over them.
func (p *hostConns) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, c := range p.conns {
		c.Close()
		delete(p.conns, k)
	}
}
