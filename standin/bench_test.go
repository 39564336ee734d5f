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
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sealbench/sealbench/internal/testenv"
)

// BenchmarkExecOverhead measures what one exec costs a client beyond the
// command itself: the official client's create + start (the hijacked,
// multiplexed stream, read to EOF) + inspect, minus the command's own run
// time inside the Sandbox (fork to reap, as the init measured it).
// Run a few hundred execs:
//
//	go test -run '^$' -bench ExecOverhead -benchtime 500x ./standin/
//
// It reports the median and p95 of the overhead and of the whole round
// trip. The goal is a median overhead of at most 1 ms and a round trip
// under 2 ms.
func BenchmarkExecOverhead(b *testing.B) {
	testenv.NeedRoot(b)
	s := newTestServer(b)
	withBusybox(b, s, false)
	id := s.run(b, &container.Config{Cmd: []string{"sleep", "100000"}}, nil)
	ctx := context.Background()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.socket)
	}}}
	one := func() (wall, cmd time.Duration) {
		t0 := time.Now()
		created, err := s.cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"/bin/true"}, AttachStdout: true, AttachStderr: true})
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
		if err != nil {
			b.Fatal(err)
		}
		wall = time.Since(t0)
		if insp.Running || insp.ExitCode != 0 {
			b.Fatalf("exec of /bin/true: running %v, exit %d", insp.Running, insp.ExitCode)
		}
		// Untimed: the command's own time, a field only the stand-in sends.
		resp, err := hc.Get("http://standin/exec/" + created.ID + "/json")
		if err != nil {
			b.Fatal(err)
		}
		var ej execJSON
		err = json.NewDecoder(resp.Body).Decode(&ej)
		resp.Body.Close()
		if err != nil || ej.StandinCommandNanoseconds <= 0 {
			b.Fatalf("reading the command's own time: %v (%d ns)", err, ej.StandinCommandNanoseconds)
		}
		return wall, time.Duration(ej.StandinCommandNanoseconds)
	}
	for range 20 { // warm up: connections, page cache, the init's threads
		one()
	}
	walls := make([]time.Duration, 0, b.N)
	overheads := make([]time.Duration, 0, b.N)
	cmds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		wall, cmd := one()
		walls = append(walls, wall)
		cmds = append(cmds, cmd)
		overheads = append(overheads, wall-cmd)
	}
	b.StopTimer()
	q, ms := testenv.Quantile, testenv.Millis
	b.ReportMetric(ms(q(overheads, 0.5)), "overhead-median-ms")
	b.ReportMetric(ms(q(overheads, 0.95)), "overhead-p95-ms")
	b.ReportMetric(ms(q(walls, 0.5)), "roundtrip-median-ms")
	b.ReportMetric(ms(q(walls, 0.95)), "roundtrip-p95-ms")
	b.ReportMetric(ms(q(cmds, 0.5)), "command-median-ms")
	b.Log(fmt.Sprintf("%d execs of /bin/true: overhead median %v p95 %v; round trip median %v p95 %v; command median %v",
		len(walls), q(overheads, 0.5), q(overheads, 0.95), q(walls, 0.5), q(walls, 0.95), q(cmds, 0.5)))
}

// BenchmarkExecStandinVsDockerd runs the same exec round trip of
// `true` (create + start with the stream read to EOF + inspect, through the
// official client) against the stand-in and against dockerd ($DOCKER_HOST;
// scripts/dockerd starts one), interleaved in one run, on the same busybox
// image, beside a host-native fork+exec+wait of the same busybox binary. The
// per-exec overhead is each round trip minus the native run next to it. It
// reports medians, p95s and the dockerd/stand-in ratio.
//
//	go test -run '^$' -bench ExecStandinVsDockerd -benchtime 300x ./standin/
func BenchmarkExecStandinVsDockerd(b *testing.B) {
	testenv.NeedRoot(b)
	bb := testenv.NeedCommand(b, "busybox")
	ctx := context.Background()
	dcli := testenv.DockerClient(b)

	s := newTestServer(b)
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

	roundTrip := func(cli *client.Client, id string) time.Duration {
		t0 := time.Now()
		ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
		if err != nil {
			b.Fatal(err)
		}
		hr, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
		if err != nil {
			b.Fatal(err)
		}
		stdcopy.StdCopy(io.Discard, io.Discard, hr.Reader)
		hr.Close()
		insp, err := cli.ContainerExecInspect(ctx, ex.ID)
		if err != nil || insp.Running || insp.ExitCode != 0 {
			b.Fatalf("exec of true: %v, %+v", err, insp)
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
		roundTrip(s.cli, sid)
		roundTrip(dcli, created.ID)
		native()
	}
	var sw, dw, so, do, nat []time.Duration
	b.ResetTimer()
	for range b.N {
		n := native()
		st := roundTrip(s.cli, sid)
		dt := roundTrip(dcli, created.ID)
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
