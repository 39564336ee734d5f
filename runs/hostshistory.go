package runs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/sshx"
)

// HostsHistoryFile, in the state directory, lists every remote host a run
// made there used, one JSON record a line ({"run", "host", "knownHosts",
// "identity", "alias"}: how hosts.json said the host is reached, paths
// and the ssh_config alias only),
// appended as each run first connects to the host. A run's directory
// and its hosts.json go at teardown; this stays, so that `audit` asks
// every host any run used for what carries the sealbench.run label
// there, even after the run's directory is gone, and `audit --fix`
// removes it.
const HostsHistoryFile = "hosts.history"

// hostUse is one line of the hosts history.
type hostUse struct {
	Run        string `json:"run"`
	Host       string `json:"host"`
	KnownHosts string `json:"knownHosts,omitempty"`
	Identity   string `json:"identity,omitempty"`
	Alias      string `json:"alias,omitempty"`
}

// RecordHostUse appends to stateDir's hosts history that run used the
// host h, reached as h says (what the run's hosts.json records).
func RecordHostUse(stateDir, run string, h HostRecord) error {
	if err := manifests.ValidateRunID(run); err != nil {
		return err
	}
	if err := manifests.ValidateSSHHost(h.Host); err != nil {
		return err
	}
	b, err := json.Marshal(hostUse{Run: run, Host: h.Host, KnownHosts: h.KnownHosts, Identity: h.Identity, Alias: h.Alias})
	if err != nil {
		return err
	}
	p := filepath.Join(stateDir, HostsHistoryFile)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("recording host %s in %s: %w", h.Host, p, err)
	}
	return nil
}

// StateDir is the state directory the run was made in (its directory
// is RunsDir(StateDir())/ID).
func (r *Run) StateDir() string { return filepath.Dir(filepath.Dir(r.Dir)) }

// readHostUses reads stateDir's hosts history (none: empty). A line that
// does not parse is an error naming it: the audit must not skip a host.
func readHostUses(stateDir string) ([]hostUse, error) {
	p := filepath.Join(stateDir, HostsHistoryFile)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []hostUse
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var u hostUse
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		err := dec.Decode(&u)
		if err == nil {
			err = manifests.ValidateSSHHost(u.Host)
		}
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", p, n, err)
		}
		out = append(out, u)
	}
	return out, sc.Err()
}

// auditHosts are the remote hosts the audit asks for labelled leftovers
// beyond the ledgers of the runs still here, each with how it is reached
// (the latest record of it in the history): with Targets, the remote
// hosts among them (Hosts) alone; otherwise every host of the history,
// only those of Run when it is set.
func (o AuditOptions) auditHosts(stateDir string) (map[string]HostRecord, error) {
	uses, err := readHostUses(stateDir)
	if err != nil {
		return nil, err
	}
	out := map[string]HostRecord{}
	for _, u := range uses {
		if (o.Run == "" || u.Run == o.Run) && (len(o.Targets) == 0 || slices.Contains(o.Hosts, u.Host)) {
			out[u.Host] = HostRecord{Host: u.Host, KnownHosts: u.KnownHosts, Identity: u.Identity, Alias: u.Alias}
		}
	}
	for _, h := range o.Hosts {
		if _, ok := out[h]; !ok {
			out[h] = HostRecord{Host: h}
		}
	}
	return out, nil
}

// sessionEngine is a remote host's Engine as its sessions see it
// (DOCKER_HOST there, or the default socket), forwarded here over SSH.
type sessionEngine struct {
	host     string
	endpoint string // as the host sees it
	c        *sshx.Client
	fwd      *sshx.Forward
}

// dialSessionEngine connects to host as rec and o say, and forwards the
// Engine its sessions use into a private directory here.
func dialSessionEngine(ctx context.Context, rec HostRecord, o SSHOptions) (*sessionEngine, error) {
	cfg, err := sshConfig(rec.Host, rec, o)
	if err != nil {
		return nil, err
	}
	cfg.DialTimeout = 15 * time.Second
	s := &sessionEngine{host: rec.Host}
	if s.c, err = sshx.Dial(ctx, cfg); err != nil {
		return nil, err
	}
	out, err := s.c.Exec(ctx, sshx.Command{Name: "docker-host", Argv: []string{"sh", "-c", `printf '%s\n' "${DOCKER_HOST:-unix:///var/run/docker.sock}"`}})
	if err == nil {
		s.endpoint = strings.TrimSpace(string(out))
		var dir string
		if dir, err = os.MkdirTemp("", "sealbench-engine-"); err == nil {
			if s.fwd, err = ForwardEngine(ctx, s.c, filepath.Join(dir, "engine.sock"), s.endpoint); err != nil {
				os.Remove(dir)
			}
		}
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("the Engine of %s's sessions: %w", rec.Host, err)
	}
	return s, nil
}

func (s *sessionEngine) close() {
	if s.fwd != nil {
		s.fwd.Close()
		os.Remove(filepath.Dir(s.fwd.Local()))
	}
	s.c.Close()
}

// labelled lists what carries run's label (any run's, for "") on the
// host's Engine.
func (s *sessionEngine) labelled(ctx context.Context, run string) ([]Resource, error) {
	cli, err := engine.NewClient(s.fwd.Endpoint())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	rs, err := Labelled(ctx, cli, "", run)
	if err != nil {
		return nil, fmt.Errorf("the Engine %s on %s: %w", s.endpoint, s.host, err)
	}
	for i := range rs {
		rs[i].Host = s.host
		rs[i].Detail = strings.TrimSpace(rs[i].Detail + " on " + s.endpoint + " on " + s.host + ", labelled " + manifests.RunLabel + " (a host in " + HostsHistoryFile + ")")
	}
	return rs, nil
}

// remove removes r, a labelled container or volume the host's Engine
// listed.
func (s *sessionEngine) remove(ctx context.Context, r Resource) error {
	return RemoveOnEngine(ctx, manifests.LedgerEntry{RunID: r.Run, Kind: r.Kind, Key: r.Key, Engine: s.fwd.Endpoint()})
}

// historyHosts adds what carries the sealbench.run label on the Engines
// of the hosts auditHosts names, but for runs whose ledgers here already
// covered that host. A host that cannot be reached is a note, or an
// error when --target named it.
func (a *auditor) historyHosts(ctx context.Context, stateDir string) error {
	hosts, err := a.opts.auditHosts(stateDir)
	if err != nil {
		return err
	}
	return forEachHost(ctx, hosts, a.opts, func(s *sessionEngine, err error) error {
		var rs []Resource
		if err == nil {
			rs, err = s.labelled(ctx, a.opts.Run)
		}
		if err != nil {
			return a.hostFailed(s, err)
		}
		for _, r := range rs {
			if !a.ledgerHosts[r.Run+" "+r.Host] {
				a.add(r)
			}
		}
		return nil
	})
}

// hostFailed is what the audit does with a host it could not ask.
func (a *auditor) hostFailed(s *sessionEngine, err error) error {
	if s != nil && slices.Contains(a.opts.Hosts, s.host) {
		return fmt.Errorf("cannot audit %s: %w", s.host, err)
	}
	a.res.Notes = append(a.res.Notes, fmt.Sprintf("not checked: %v", err))
	return nil
}

// forEachHost calls f with each host's forwarded Engine (or why there is
// none; s then names only the host), in the order of the hosts' names,
// and closes it after.
func forEachHost(ctx context.Context, hosts map[string]HostRecord, o AuditOptions, f func(*sessionEngine, error) error) error {
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	slices.Sort(names)
	for _, h := range names {
		s, err := dialSessionEngine(ctx, hosts[h], o.SSH)
		if err != nil {
			err = fmt.Errorf("host %s: %w", h, err)
			if ferr := f(&sessionEngine{host: h}, err); ferr != nil {
				return ferr
			}
			continue
		}
		ferr := f(s, nil)
		s.close()
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// fixHistoryHosts removes what carries the label on the hosts the audit
// asks (of Run, when set), but what is a live run's, and returns every
// failure.
func fixHistoryHosts(ctx context.Context, stateDir string, o AuditOptions, live map[string]bool, logf func(string, ...any)) error {
	hosts, err := o.auditHosts(stateDir)
	if err != nil {
		return err
	}
	var errs []error
	err = forEachHost(ctx, hosts, o, func(s *sessionEngine, err error) error {
		var rs []Resource
		if err == nil {
			rs, err = s.labelled(ctx, o.Run)
		}
		if err != nil && !slices.Contains(o.Hosts, s.host) {
			logf("not checked: %v", err) // as the audit says it
			return nil
		}
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		// Containers first: a volume in use is not removed.
		slices.SortStableFunc(rs, func(a, b Resource) int {
			return boolInt(a.Kind != manifests.ResourceContainer) - boolInt(b.Kind != manifests.ResourceContainer)
		})
		for _, r := range rs {
			if live[r.Run] {
				continue
			}
			if err := s.remove(ctx, r); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r, err))
			} else {
				logf("removed %s", r)
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
