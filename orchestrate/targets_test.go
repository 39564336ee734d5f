package orchestrate

// The targets' registrations, which the sealbench command links and the
// tests here use.
import _ "github.com/sealbench/sealbench/provision/targets"
