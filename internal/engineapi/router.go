package engineapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxJSONBody bounds a request's body on every route but POST
// /images/load (whose tar streams to the store): the Engine API's JSON
// bodies (a container's create request, an exec's) are a few KiB. A larger
// one is refused with 413 before it is read: at once when its
// Content-Length says so, else when reading it passes the bound.
const MaxJSONBody = 4 << 20

// Identity is how a Router names its Engine in the answers.
type Identity struct {
	// Name says who does not implement a call, in a 501: "the sealbench
	// stand-in".
	Name string
	// Server is the Server header: "sealbench-standin/VERSION (linux)".
	Server string
	// OS is the Ostype header: "linux".
	OS string
}

// Router serves the Engine API with a Backend: it takes the version prefix
// off the path (/v1.51/containers/json and /containers/json are one call),
// routes method and path (http.ServeMux patterns), bounds JSON bodies at
// MaxJSONBody, and answers in the Engine API's shape: JSON, or an error
// {"message": ...} whose status Fail chooses. A call a Backend does not
// serve (an optional interface it does not implement, or the rest of the
// Engine API) is 501 naming it; any other path is 404. A GET route does
// not answer HEAD, but for /_ping. As http.ServeMux does, a path that is
// not clean (a "//", a "..") is redirected to its clean form.
type Router struct {
	id  Identity
	mux *http.ServeMux
}

var _ http.Handler = (*Router)(nil)

// NewRouter returns a Router for b; the optional interfaces b implements
// (ImageLister, ImagePuller, ContainerLister, ContainerStopper,
// ContainerAttacher) add their routes.
func NewRouter(b Backend, id Identity) *Router {
	rt := &Router{id: id, mux: http.NewServeMux()}
	rt.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { rt.unserved(w, r) })

	rt.handle("GET /_ping", ping)
	rt.handle("HEAD /_ping", ping)
	rt.handle("GET /version", answer(http.StatusOK, func(r *http.Request) (any, error) { return b.SystemVersion(r.Context()) }))
	rt.handle("GET /info", answer(http.StatusOK, func(r *http.Request) (any, error) { return b.SystemInfo(r.Context()) }))

	rt.mux.HandleFunc("POST /images/load", b.ImageLoad) // a stream: not bounded
	rt.handle("GET /images/{name...}", func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutSuffix(strings.TrimSuffix(r.PathValue("name"), "/"), "/json")
		if !ok || name == "" {
			rt.unserved(w, r)
			return
		}
		answer(http.StatusOK, func(r *http.Request) (any, error) { return b.ImageInspect(r.Context(), name) })(w, r)
	})
	rt.handle("DELETE /images/{name...}", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimSuffix(r.PathValue("name"), "/")
		if name == "" {
			rt.unserved(w, r)
			return
		}
		answer(http.StatusOK, func(r *http.Request) (any, error) { return b.ImageDelete(r.Context(), name, BoolParam(r, "force")) })(w, r)
	})

	rt.handle("POST /containers/create", answer(http.StatusCreated, func(r *http.Request) (any, error) {
		return b.ContainerCreate(r.Context(), r.URL.Query().Get("name"), r.Body)
	}))
	rt.handle("GET /containers/{id}/json", answer(http.StatusOK, func(r *http.Request) (any, error) {
		return b.ContainerInspect(r.Context(), r.PathValue("id"))
	}))
	rt.handle("POST /containers/{id}/start", func(w http.ResponseWriter, r *http.Request) {
		started, err := b.ContainerStart(r.Context(), r.PathValue("id"))
		changed(w, started, err)
	})
	rt.handle("POST /containers/{id}/wait", withID(b.ContainerWait))
	rt.handle("GET /containers/{id}/logs", withID(b.ContainerLogs))
	rt.handle("DELETE /containers/{id}", func(w http.ResponseWriter, r *http.Request) {
		changed(w, true, b.ContainerDelete(r.Context(), r.PathValue("id"), BoolParam(r, "force")))
	})

	rt.handle("POST /containers/{id}/exec", answer(http.StatusCreated, func(r *http.Request) (any, error) {
		return b.ContainerExec(r.Context(), r.PathValue("id"), r.Body)
	}))
	rt.handle("POST /exec/{id}/start", withID(b.ExecStart))
	rt.handle("GET /exec/{id}/json", answer(http.StatusOK, func(r *http.Request) (any, error) {
		return b.ExecInspect(r.Context(), r.PathValue("id"))
	}))

	if l, ok := b.(ImageLister); ok {
		rt.handle("GET /images/json", answer(http.StatusOK, func(r *http.Request) (any, error) {
			return l.ImageList(r.Context(), r.URL.Query().Get("filters"))
		}))
	}
	if p, ok := b.(ImagePuller); ok {
		rt.handle("POST /images/create", p.ImageCreate)
	}
	if l, ok := b.(ContainerLister); ok {
		rt.handle("GET /containers/json", answer(http.StatusOK, func(r *http.Request) (any, error) {
			return l.ContainerList(r.Context(), BoolParam(r, "all"), r.URL.Query().Get("filters"))
		}))
	}
	if s, ok := b.(ContainerStopper); ok {
		rt.handle("POST /containers/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
			opts, err := stopOptions(r)
			if err != nil {
				Fail(w, err)
				return
			}
			stopped, err := s.ContainerStop(r.Context(), r.PathValue("id"), opts)
			changed(w, stopped, err)
		})
		rt.handle("POST /containers/{id}/kill", func(w http.ResponseWriter, r *http.Request) {
			changed(w, true, s.ContainerKill(r.Context(), r.PathValue("id"), r.URL.Query().Get("signal")))
		})
	}
	if a, ok := b.(ContainerAttacher); ok {
		rt.handle("POST /containers/{id}/attach", withID(a.ContainerAttach))
	}
	return rt
}

// ServeHTTP answers an Engine API request.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := Unversioned(r.URL.Path)
	if err != nil {
		WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Api-Version", APIVersion)
	w.Header().Set("Server", rt.id.Server)
	w.Header().Set("Ostype", rt.id.OS)
	w.Header().Set("Docker-Experimental", "false")
	// The routes see the path without its prefix, as http.StripPrefix
	// gives it.
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path, r2.URL.RawPath = p, ""
	rt.mux.ServeHTTP(w, r2)
}

// handle routes pattern to h, its request's body bounded at MaxJSONBody.
// ServeMux lets a GET pattern answer HEAD too; the Engine API does not.
func (rt *Router) handle(pattern string, h http.HandlerFunc) {
	get := strings.HasPrefix(pattern, http.MethodGet+" ")
	rt.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if get && r.Method == http.MethodHead {
			rt.unserved(w, r)
			return
		}
		if r.ContentLength > MaxJSONBody {
			Fail(w, fmt.Errorf("%w: %s %s sent %d bytes, and takes at most %d MiB", ErrTooLarge, r.Method, r.URL.Path, r.ContentLength, MaxJSONBody>>20))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxJSONBody)
		h(w, r)
	})
}

func (rt *Router) unserved(w http.ResponseWriter, r *http.Request) {
	Unserved(w, r, r.URL.Path, rt.id.Name)
}

// answer writes what f returns: v as JSON with code, or the error.
func answer(code int, f func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := f(r)
		if err != nil {
			Fail(w, err)
			return
		}
		WriteJSON(w, code, v)
	}
}

// changed answers a call with no body: 204, 304 when it changed nothing,
// or the error.
func changed(w http.ResponseWriter, ok bool, err error) {
	switch {
	case err != nil:
		Fail(w, err)
	case !ok:
		w.WriteHeader(http.StatusNotModified)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// withID hands a streaming call the {id} of its path.
func withID(h func(w http.ResponseWriter, r *http.Request, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { h(w, r, r.PathValue("id")) }
}

func ping(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache, no-store, must-revalidate")
	w.Header().Set("Pragma", "no-cache")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write([]byte("OK"))
	}
}

// stopOptions reads POST /containers/{id}/stop's parameters.
func stopOptions(r *http.Request) (StopOptions, error) {
	q := r.URL.Query()
	opts := StopOptions{Signal: q.Get("signal")}
	if t := q.Get("t"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil {
			return opts, fmt.Errorf("%w: t=%q is not a number of seconds", ErrBadInput, t)
		}
		d := time.Duration(n) * time.Second
		opts.Timeout = &d
	}
	return opts, nil
}

// BoolParam says whether the query parameter name is true: "1", "yes" or
// "true" in any case, as the official client and the CLI send it.
func BoolParam(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	return v == "1" || v == "yes" || strings.EqualFold(v, "true")
}
