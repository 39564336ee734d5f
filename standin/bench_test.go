//go:build linux

package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/internal/testenv"
)

// BenchmarkExecOverhead measures one exec of /bin/true in a stand-in
// Sandbox as the runner makes it (engine.Execer: create; start, its stream
// read to EOF; inspect), beside the floor, a bare fork+exec+wait of the
// host's /bin/true (os/exec) from the same process, and beside the same
// exec through the official client. The three take turns, each round in
// the next of their six orders, so that each comes first, second and last,
// and after each of the others, equally often: all see the same machine,
// and what one leaves behind (an exec's last goroutines, its child's
// reaping) weighs on each of the others alike. Run a few thousand:
//
//	go test -run '^$' -bench ExecOverhead -benchtime 2000x ./standin/
//
// It runs twice: with the stand-in in the benchmark's own process
// (in-process), where a message between client and server can be taken
// up by the thread that sent it, and in a process of its own (process), as
// a run has it, where every message wakes another process: on this
// machine, a VM, waking an idle one costs some 55 µs each time.
//
// It reports the medians, each round trip over the floor (the goal: at
// most 1.5x), and the overhead: the round trip's median minus the median
// of the command's own time inside the Sandbox (fork to reap, as the init
// measured it, for the official client's last 256 execs, read once they
// are all done).
func BenchmarkExecOverhead(b *testing.B) {
	testenv.NeedRoot(b)
	b.Run("standin=in-process", func(b *testing.B) { benchExecOverhead(b, newTestServer(b)) })
	b.Run("standin=process", func(b *testing.B) { benchExecOverhead(b, serveProcess(b)) })
}

func benchExecOverhead(b *testing.B, s *testServer) {
	withBusybox(b, s, false)
	id := s.run(b, &container.Config{Cmd: []string{"sleep", "100000"}}, nil)
	ctx := context.Background()
	x := engine.NewExecer(ctx, s.cli)
	defer x.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.socket)
	}}}
	opts := container.ExecOptions{Cmd: []string{"/bin/true"}, AttachStdout: true, AttachStderr: true}
	floor := func() time.Duration {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	execer := func() time.Duration {
		t0 := time.Now()
		r, err := x.Exec(ctx, id, opts, nil, io.Discard, io.Discard)
		d := time.Since(t0)
		if err != nil || r.ExitCode != 0 {
			b.Fatalf("exec of /bin/true: %v, exit %d", err, r.ExitCode)
		}
		return d
	}
	var officialIDs []string // for the commands' own times, read at the end
	official := func() time.Duration {
		t0 := time.Now()
		created, err := s.cli.ContainerExecCreate(ctx, id, opts)
		if err != nil {
			b.Fatal(err)
		}
		hr, err := s.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := stdcopy.StdCopy(io.Discard, io.Discard, hr.Reader); err != nil {
			b.Fatal(err)
		}
		hr.Close()
		insp, err := s.cli.ContainerExecInspect(ctx, created.ID)
		d := time.Since(t0)
		if err != nil || insp.Running || insp.ExitCode != 0 {
			b.Fatalf("exec of /bin/true: %v, running %v, exit %d", err, insp.Running, insp.ExitCode)
		}
		officialIDs = append(officialIDs, created.ID)
		return d
	}
	// commandTime is an exec's own time in the Sandbox: a field only the
	// stand-in sends.
	commandTime := func(execID string) time.Duration {
		resp, err := hc.Get("http://standin/exec/" + execID + "/json")
		if err != nil {
			b.Fatal(err)
		}
		var ej execJSON
		err = json.NewDecoder(resp.Body).Decode(&ej)
		resp.Body.Close()
		if err != nil || ej.StandinCommandNanoseconds <= 0 {
			b.Fatalf("reading the command's own time: %v (%d ns)", err, ej.StandinCommandNanoseconds)
		}
		return time.Duration(ej.StandinCommandNanoseconds)
	}
	ways := []func() time.Duration{floor, execer, official}
	orders := [][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}}
	times := make([][]time.Duration, len(ways))
	round := func(i int, keep bool) {
		for _, w := range orders[i%len(orders)] {
			d := ways[w]()
			if keep {
				times[w] = append(times[w], d)
			}
		}
	}
	for i := range 30 { // warm up: connections, page cache, the init's threads
		round(i, false)
	}
	officialIDs = officialIDs[:0]
	b.ResetTimer()
	for i := range b.N {
		round(i, true)
	}
	b.StopTimer()
	// The stand-in keeps the last maxExecRecords execs of a container, and
	// each round makes two: a quarter of them are official ones well inside.
	var cmds []time.Duration
	for _, id := range officialIDs[max(0, len(officialIDs)-maxExecRecords/4):] {
		cmds = append(cmds, commandTime(id))
	}
	q, ms := testenv.Quantile, testenv.Millis
	fl, ex, of := q(times[0], 0.5), q(times[1], 0.5), q(times[2], 0.5)
	b.ReportMetric(ms(fl), "floor-median-ms")
	b.ReportMetric(ms(ex), "roundtrip-median-ms")
	b.ReportMetric(ms(q(times[1], 0.95)), "roundtrip-p95-ms")
	b.ReportMetric(ms(of), "official-median-ms")
	b.ReportMetric(float64(ex)/float64(fl), "roundtrip/floor")
	b.ReportMetric(float64(of)/float64(fl), "official/floor")
	cmd := q(cmds, 0.5)
	b.ReportMetric(ms(cmd), "command-median-ms")
	b.ReportMetric(ms(ex-cmd), "overhead-median-ms")
	b.Log(fmt.Sprintf("%s, %d rounds of /bin/true: the floor (fork+exec+wait on the host) %v; the runner's exec (engine.Execer) %v = %.2fx the floor, %v over the command's own %v inside the Sandbox; the official client's %v = %.2fx",
		b.Name(), len(times[0]), fl, ex, float64(ex)/float64(fl), ex-cmd, cmd, of, float64(of)/float64(fl)))
}

// BenchmarkExecStandinVsDockerd runs the same exec round trip of
// `true` (create + start with the stream read to EOF + inspect, as the
// runner makes them: engine.Execer) against the stand-in, in a process of
// its own, and against dockerd ($DOCKER_HOST; scripts/dockerd starts one),
// interleaved in one run, on the same busybox image, beside a host-native
// fork+exec+wait of the same busybox binary. The
// per-exec overhead is each round trip minus the native run next to it. It
// reports medians, p95s and the dockerd/stand-in ratio.
//
//	go test -run '^$' -bench ExecStandinVsDockerd -benchtime 300x ./standin/
func BenchmarkExecStandinVsDockerd(b *testing.B) {
	testenv.NeedRoot(b)
	bb := testenv.NeedCommand(b, "busybox")
	ctx := context.Background()
	dcli := testenv.DockerClient(b)

	s := serveProcess(b)
	withBusybox(b, s, false)
	sid := s.run(b, &container.Config{Cmd: []string{"sleep", "100000"}}, nil)

	resp, err := dcli.ImageLoad(ctx, bytes.NewReader(dockerSaveTar(b, testImage, buildImage(b, layerTar(b, busyboxEntries(b))))))
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	defer dcli.ImageRemove(ctx, testImage, image.RemoveOptions{Force: true})
	created, err := dcli.ContainerCreate(ctx, &container.Config{Image: testImage, Cmd: []string{"sleep", "100000"}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		b.Fatal(err)
	}
	defer dcli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true})
	if err := dcli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		b.Fatal(err)
	}

	sx, dx := engine.NewExecer(ctx, s.cli), engine.NewExecer(ctx, dcli)
	defer sx.Close()
	defer dx.Close()
	roundTrip := func(x *engine.Execer, id string) time.Duration {
		t0 := time.Now()
		r, err := x.Exec(ctx, id, container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true}, nil, io.Discard, io.Discard)
		if err != nil || r.Running || r.ExitCode != 0 {
			b.Fatalf("exec of true: %v, %+v", err, r)
		}
		return time.Since(t0)
	}
	native := func() time.Duration {
		t0 := time.Now()
		if err := exec.Command(bb, "true").Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 10 {
		roundTrip(sx, sid)
		roundTrip(dx, created.ID)
		native()
	}
	var sw, dw, so, do, nat []time.Duration
	b.ResetTimer()
	for range b.N {
		n := native()
		st := roundTrip(sx, sid)
		dt := roundTrip(dx, created.ID)
		nat = append(nat, n)
		sw, dw = append(sw, st), append(dw, dt)
		so, do = append(so, st-n), append(do, dt-n)
	}
	b.StopTimer()
	q, ms := testenv.Quantile, testenv.Millis
	b.ReportMetric(ms(q(so, 0.5)), "standin-overhead-median-ms")
	b.ReportMetric(ms(q(so, 0.95)), "standin-overhead-p95-ms")
	b.ReportMetric(ms(q(do, 0.5)), "dockerd-overhead-median-ms")
	b.ReportMetric(ms(q(do, 0.95)), "dockerd-overhead-p95-ms")
	b.ReportMetric(ms(q(sw, 0.5)), "standin-roundtrip-median-ms")
	b.ReportMetric(ms(q(dw, 0.5)), "dockerd-roundtrip-median-ms")
	b.ReportMetric(ms(q(nat, 0.5)), "native-median-ms")
	b.ReportMetric(float64(q(do, 0.5))/float64(q(so, 0.5)), "dockerd/standin-overhead")
}
