// Package manifests holds the types and file formats that every other part
// of sealbench shares: digests, the bundle manifest, and (as later parts
// need them) run pins, samples, ledger entries and audit records.
//
// It imports only the standard library and nothing else of sealbench, so any
// package, including the small binaries that ship inside a bundle, can use it.
//
// # Reading a format
//
// Every format is read the same way: Load (parse, strictly, with a size
// bound), then FillDefaults, then Validate, which reports every problem it
// finds, each naming its field, rather than stopping at the first.
package manifests
