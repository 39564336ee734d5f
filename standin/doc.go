// Package standin is the Engine API stand-in: a small server that answers
// the Docker Engine API calls the sealbench runner makes to dockerd, and
// runs each Sandbox as a set of Linux namespaces directly (package
// sandbox), with no Docker. The runner drives dockerd and the stand-in with
// the same official Go client; the docker CLI works against it too.
//
// # Endpoints
//
// Served through engineapi.Router, the kube-engine's too, with or without
// a /vX.Y prefix (1.24 to 1.51; clients negotiate):
//
//	GET|HEAD /_ping, GET /version, GET /info
//	POST /images/load (docker save tars and OCI layout tars), GET /images/json,
//	GET /images/{name}/json, DELETE /images/{name}
//	POST /containers/create, GET /containers/json (filters: label, id, name,
//	status, ancestor), GET /containers/{id}/json, POST /containers/{id}/start,
//	stop, kill, wait, attach (output only), GET /containers/{id}/logs,
//	DELETE /containers/{id}
//	POST /containers/{id}/exec, POST /exec/{id}/start (hijacked, multiplexed
//	stream; stdin when attached), GET /exec/{id}/json
//
// Anything else answers in the Engine API's error shape ({"message": ...}):
// 501 naming the endpoint for the rest of the Engine API, 404 otherwise. A
// request's body is at most 4 MiB (413 beyond), but an image load's.
// Create refuses, with a 400 saying so, what the stand-in would otherwise
// run differently from dockerd: networks other than none, published ports,
// host namespaces, resource limits (there are no cgroups), volumes, TTYs.
//
// # Images
//
// A load spools the upload under the state directory, checks every blob
// against its digest and every layer against the config's diff ID while
// reading it, and unpacks layers with the kernel refusing any path that
// leaves the layer (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS). OCI
// whiteouts become overlayfs whiteouts; the Sandbox's root is an overlay
// of the layers, mounted inside the Sandbox's own mount namespace.
//
// # State and audit
//
// The state directory (one stand-in per directory, held by a lock) keeps
// images and layers across restarts; containers last only as long as the
// stand-in. Package inventory lists what the directory holds, and what of the
// stand-in is still mounted or running, for the audit.
//
// # Connections
//
// Listen opens the only kind of listener the stand-in has: a unix socket
// in a 0700 directory, itself 0600, that refuses peers of another uid.
package standin
