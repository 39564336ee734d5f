//go:build !unix

package manifests

const openNonblock = 0
