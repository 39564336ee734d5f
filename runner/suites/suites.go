// Package suites links every built-in suite but the twelve cells (which
// package runner/cells is), so that each one's registration
// (cells.Register, from its init) is there for the commands and the
// runner. A new built-in suite is a directory here (its suite.json,
// scripts and a Go file that embeds and registers them) and one line
// below; a user's suite needs neither (sealbench run --suite-dir).
package suites

import (
	_ "github.com/sealbench/sealbench/runner/suites/agenttools"
)
