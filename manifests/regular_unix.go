//go:build unix

package manifests

import "syscall"

// openNonblock keeps an open of a fifo from waiting for a writer; on a
// regular file it changes nothing.
const openNonblock = syscall.O_NONBLOCK
