// Package daemonapi is the contract between layerfsd and the programs that
// run it: the documents `layerfsd ... --json` prints (ReadyInfo, Stats,
// CommitResult, UnmountResult, Layer, InitResult and, on failure, Error), its
// exit codes, typed builders for its command lines (MountCmd{...}.Args(),
// Shell(cmd)), and decoders that refuse what layerfsd would not print
// (DecodeReady, DecodeStats, DecodeCommit, ...).
//
// The daemon (package layerfs and cmd/layerfsd) and the runner, which drives
// layerfsd inside Sandboxes through a shell, share this package, so a field
// renamed on one side fails to compile or to decode on the other instead of
// silently reading zero. It has no build tag and imports only the standard
// library, so the host side can link it too.
package daemonapi
