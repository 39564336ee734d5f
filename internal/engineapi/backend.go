package engineapi

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Backend is an Engine behind the Router: the calls every front serves,
// which are the calls the runner, the conformance suite and a target's
// teardown make. The methods are named after the Engine API's operations.
//
// A method that answers JSON returns the value the Router writes, with
// the status its contract names, or an error the Router writes in the
// Engine API's shape, with the status the sentinel it wraps chooses (see
// Fail). A method that answers a stream gets the request and answers it
// itself, its errors through Fail. A request's JSON body is at most
// MaxJSONBody bytes: reading more fails with an error that Fail answers
// 413 (DecodeJSON says so).
type Backend interface {
	System
	Images
	Containers
	Execs
}

// System is what the Engine says of itself. GET and HEAD /_ping are the
// Router's.
type System interface {
	// SystemVersion answers GET /version (200).
	SystemVersion(ctx context.Context) (any, error)
	// SystemInfo answers GET /info (200).
	SystemInfo(ctx context.Context) (any, error)
}

// Images are the calls that bring an image in, look at it and remove it.
type Images interface {
	// ImageLoad answers POST /images/load, a `docker save` tar in r.Body
	// that streams with no bound, as dockerd answers it: 200 and a JSON
	// stream.
	ImageLoad(w http.ResponseWriter, r *http.Request)
	// ImageInspect answers GET /images/{name}/json (200); name may hold
	// slashes. An image it does not have wraps ErrNotFound.
	ImageInspect(ctx context.Context, name string) (any, error)
	// ImageDelete answers DELETE /images/{name} (200) with what it
	// untagged and deleted.
	ImageDelete(ctx context.Context, name string, force bool) (any, error)
}

// Containers are a container's life, from create to delete.
type Containers interface {
	// ContainerCreate answers POST /containers/create?name=NAME (201):
	// body is the create request's JSON.
	ContainerCreate(ctx context.Context, name string, body io.Reader) (any, error)
	// ContainerInspect answers GET /containers/{id}/json (200). id is a
	// full id, a unique prefix of one, or a name; one that names no
	// container wraps ErrNotFound (and so in every call that takes one).
	ContainerInspect(ctx context.Context, id string) (any, error)
	// ContainerStart answers POST /containers/{id}/start: 204 when it
	// started the container, 304 when it returns false (running already).
	ContainerStart(ctx context.Context, id string) (started bool, err error)
	// ContainerWait answers POST /containers/{id}/wait?condition=C: the
	// headers at once (the official client returns from ContainerWait
	// only when they come), the exit when the condition holds.
	ContainerWait(w http.ResponseWriter, r *http.Request, id string)
	// ContainerLogs answers GET /containers/{id}/logs in stdcopy frames
	// (Frame).
	ContainerLogs(w http.ResponseWriter, r *http.Request, id string)
	// ContainerDelete answers DELETE /containers/{id} (204); a running
	// container is refused (ErrConflict) unless force is set.
	ContainerDelete(ctx context.Context, id string, force bool) error
}

// Execs are a process run in a running container.
type Execs interface {
	// ContainerExec answers POST /containers/{id}/exec (201): body is the
	// exec's JSON. The exec does not run until ExecStart.
	ContainerExec(ctx context.Context, id string, body io.Reader) (any, error)
	// ExecStart answers POST /exec/{id}/start: r.Body is its JSON (it may
	// be empty); attached, the connection is hijacked (Hijack) for the
	// exec's stdcopy stream, and the exit code is kept before the stream
	// ends, as clients inspect the exec as soon as they read EOF.
	ExecStart(w http.ResponseWriter, r *http.Request, id string)
	// ExecInspect answers GET /exec/{id}/json (200).
	ExecInspect(ctx context.Context, id string) (any, error)
}

// The calls a Backend may leave out: the Router answers them 501, as it
// does every call of the Engine API it has no route for.
type (
	// ImageLister answers GET /images/json?filters=F (200); filters is
	// the parameter's JSON, as the client sent it.
	ImageLister interface {
		ImageList(ctx context.Context, filters string) (any, error)
	}
	// ImagePuller answers POST /images/create?fromImage=&tag= itself, as
	// dockerd does: 200 and a JSON stream.
	ImagePuller interface {
		ImageCreate(w http.ResponseWriter, r *http.Request)
	}
	// ContainerLister answers GET /containers/json?all=A&filters=F (200).
	ContainerLister interface {
		ContainerList(ctx context.Context, all bool, filters string) (any, error)
	}
	// ContainerStopper stops a container and signals it.
	ContainerStopper interface {
		// ContainerStop answers POST /containers/{id}/stop: 204 when it
		// stopped the container, 304 when it returns false (it was not
		// running).
		ContainerStop(ctx context.Context, id string, opts StopOptions) (stopped bool, err error)
		// ContainerKill answers POST /containers/{id}/kill?signal=S (204);
		// "" is SIGKILL. A container that is not running wraps ErrConflict.
		ContainerKill(ctx context.Context, id, signal string) error
	}
	// ContainerAttacher answers POST /containers/{id}/attach itself: the
	// connection hijacked for the container's output.
	ContainerAttacher interface {
		ContainerAttach(w http.ResponseWriter, r *http.Request, id string)
	}
)

// StopOptions are the parameters of POST /containers/{id}/stop.
type StopOptions struct {
	// Signal is sent first ("signal"); "" is the container's stop signal.
	Signal string
	// Timeout is how long to wait for the container to exit before it is
	// killed ("t"); nil is the Backend's default.
	Timeout *time.Duration
}
