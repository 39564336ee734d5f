//go:build linux

package kubetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// FUSEResource is the extended resource the node offers /dev/fuse as: a
// container that asks for one (resources.limits) gets the device node
// and the device cgroup's permission to open it, and nothing else of
// privileged's. Without it, neither a hostPath volume of /dev/fuse nor
// CAP_SYS_ADMIN lets a container open the device: the runtime's device
// cgroup denies it (EPERM).
const FUSEResource = "sealbench.dev/fuse"

// fuseDevices is how many containers at once may hold FUSEResource.
const fuseDevices = 16

// fusePlugin is a kubelet device plugin that offers /dev/fuse.
type fusePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	stop chan struct{}
}

func (p *fusePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch offers fuseDevices healthy devices, which never change.
func (p *fusePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	var devs []*pluginapi.Device
	for i := range fuseDevices {
		devs = append(devs, &pluginapi.Device{ID: "fuse" + strconv.Itoa(i), Health: pluginapi.Healthy})
	}
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	select {
	case <-s.Context().Done():
	case <-p.stop:
	}
	return nil
}

// Allocate gives each container /dev/fuse, read and write.
func (p *fusePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/fuse", HostPath: "/dev/fuse", Permissions: "rw"}},
		})
	}
	return resp, nil
}

func (p *fusePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// startFUSEPlugin serves the device plugin on a socket in the kubelet's
// device plugin directory (the kubelet's own path, whatever its root
// directory) and registers it with the kubelet, retrying until the
// kubelet's registration socket answers. Stop ends it (stopFUSEPlugin).
func (c *Cluster) startFUSEPlugin(ctx context.Context) error {
	// The kubelet empties the directory as its device manager starts, and
	// then creates its socket there.
	if err := c.waitFor(ctx, "kubelet (its device plugin socket)", 60*time.Second, func() error {
		_, err := os.Stat(pluginapi.KubeletSocket)
		return err
	}); err != nil {
		return err
	}
	name := fusePluginSocket(c.Dir)
	sock := filepath.Join(pluginapi.DevicePluginPath, name)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("the /dev/fuse device plugin: %w", err)
	}
	p := &fusePlugin{stop: make(chan struct{})}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go srv.Serve(l)
	c.stopFUSE = func() {
		close(p.stop)
		srv.Stop()
		os.Remove(sock)
	}
	return c.waitFor(ctx, "kubelet (the /dev/fuse device plugin's registration)", 60*time.Second, func() error {
		conn, err := grpc.NewClient("unix://"+pluginapi.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
			Version: pluginapi.Version, Endpoint: name, ResourceName: FUSEResource})
		return err
	})
}

// fusePluginSocket is the name of the device plugin's socket of the
// cluster in dir.
func fusePluginSocket(dir string) string { return "sealbench-fuse-" + filepath.Base(dir) + ".sock" }
