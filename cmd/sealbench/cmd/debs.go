//go:build !sealbench_bundle

package cmd

import (
	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/vmimages"
)

// debSettings are the flags of every command that may build an image:
// where locked packages may come from, and whether a build may fall back
// to a fresh lock when the locked files are in no source.
type debSettings struct {
	sources  []string
	noRelock bool
	cache    string
}

func (d *debSettings) flags(fl *pflag.FlagSet) {
	fl.StringArrayVar(&d.sources, "deb-source", nil, "a directory of .debs or an http(s) URL to fetch locked packages from, tried after the cache and before apt (repeatable; also "+vmimages.SourcesEnv+")")
	fl.BoolVar(&d.noRelock, "no-relock", false, "fail, naming what is missing, instead of building from a fresh lock when the locked packages are in no source")
	fl.StringVar(&d.cache, "cache", vmimages.DefaultCacheDir(), "where fetched packages, apt state and fresh locks are cached")
}

// check validates the sources before anything is built.
func (d *debSettings) check() error {
	for _, s := range d.sources {
		if _, err := vmimages.ParseSource(s); err != nil {
			return usageErrorf("--deb-source takes a directory of .debs or an http(s) URL", "%v", err)
		}
	}
	return nil
}

func (d *debSettings) cacheDir() string {
	if d.cache == "" {
		return vmimages.DefaultCacheDir()
	}
	return d.cache
}

// options are the settings as package orchestrate takes them.
func (d *debSettings) options() orchestrate.Debs {
	return orchestrate.Debs{CacheDir: d.cacheDir(), Sources: d.sources, NoRelock: d.noRelock}
}
