// Package targets links every target's package, so that each one's
// registration (provision.Register, from its init) is there for the
// commands, teardown, the audit and the doctor. A new target is a package
// under provision/ and one line here.
package targets

import (
	_ "github.com/sealbench/sealbench/provision/apple"
	_ "github.com/sealbench/sealbench/provision/docker"
	_ "github.com/sealbench/sealbench/provision/kubernetes"
	_ "github.com/sealbench/sealbench/provision/lima"
	_ "github.com/sealbench/sealbench/provision/local"
	_ "github.com/sealbench/sealbench/provision/microsandbox"
	_ "github.com/sealbench/sealbench/provision/qemu"
)
