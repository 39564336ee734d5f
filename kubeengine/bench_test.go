//go:build kubetest && linux

package kubeengine_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/sealbench/sealbench/internal/testenv"
)

// BenchmarkExecKubeVsDockerd is the round trip of one exec as the runner
// makes it (create, attach and read its stream to the end, inspect) of
// `true` as 65534, through the kube-engine (the pod exec subresource: API
// server, kubelet, containerd, runc, and the wrapper that sets the user)
// and through dockerd ($DOCKER_HOST: containerd and runc), in alternating
// order, on the same image and Sandbox configuration. It reports each
// one's median and p95 and the ratio of the medians: what the kubernetes
// target's transport adds to every step of a cell, against docker's.
//
//	make bench-kube   # go test -tags kubetest -run '^$' -bench ExecKubeVsDockerd -benchtime 200x ./kubeengine/
func BenchmarkExecKubeVsDockerd(b *testing.B) {
	ctx := context.Background()
	dcli := testenv.DockerClient(b)
	kcli, _ := newEngine(b)
	img := loadImage(b, kcli)
	_, tarb := chrootImage(b)
	resp, err := dcli.ImageLoad(ctx, bytes.NewReader(tarb.Bytes()), client.ImageLoadWithQuiet(true))
	if err != nil {
		b.Fatalf("loading the image into dockerd: %v", err)
	}
	resp.Body.Close()
	b.Cleanup(func() { dcli.ImageRemove(context.Background(), img.String(), image.RemoveOptions{}) })
	cfg, hc := sandboxConfig(img, "sleep", "600")
	kid := create(b, kcli, "ke-bench", cfg, hc)
	dresp, err := dcli.ContainerCreate(ctx, cfg, hc, nil, nil, "ke-bench-dockerd")
	if err != nil {
		b.Fatalf("creating the dockerd Sandbox: %v", err)
	}
	b.Cleanup(func() { dcli.ContainerRemove(context.Background(), dresp.ID, container.RemoveOptions{Force: true}) })
	for _, c := range []struct {
		cli *client.Client
		id  string
	}{{kcli, kid}, {dcli, dresp.ID}} {
		if err := c.cli.ContainerStart(ctx, c.id, container.StartOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	one := func(cli *client.Client, id string) time.Duration {
		t0 := time.Now()
		if r := testenv.OfficialExec(b, cli, id, container.ExecOptions{Cmd: []string{"true"}, User: "65534:65534"}, ""); r.Code != 0 {
			b.Fatalf("exec: %+v", r)
		}
		return time.Since(t0)
	}
	for range 5 { // warm up: connections, the API server's and kubelet's caches
		one(kcli, kid)
		one(dcli, dresp.ID)
	}
	var kube, docker []time.Duration
	b.ResetTimer()
	for i := range b.N {
		// Alternating, which goes first too.
		if i%2 == 0 {
			kube = append(kube, one(kcli, kid))
			docker = append(docker, one(dcli, dresp.ID))
		} else {
			docker = append(docker, one(dcli, dresp.ID))
			kube = append(kube, one(kcli, kid))
		}
	}
	b.StopTimer()
	q, ms := testenv.Quantile, testenv.Millis
	b.ReportMetric(ms(q(kube, 0.5)), "kube-median-ms")
	b.ReportMetric(ms(q(kube, 0.95)), "kube-p95-ms")
	b.ReportMetric(ms(q(docker, 0.5)), "dockerd-median-ms")
	b.ReportMetric(ms(q(docker, 0.95)), "dockerd-p95-ms")
	b.ReportMetric(float64(q(kube, 0.5))/float64(q(docker, 0.5)), "kube/dockerd")
	b.Log(fmt.Sprintf("%d execs of true as 65534 each, alternating: kube-engine median %v p95 %v; dockerd median %v p95 %v; kube/dockerd %.2fx",
		len(kube), q(kube, 0.5), q(kube, 0.95), q(docker, 0.5), q(docker, 0.95), float64(q(kube, 0.5))/float64(q(docker, 0.5))))
}
