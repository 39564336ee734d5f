// Package runs keeps the books of the runs made on this machine, and takes
// down what they made: a run is a directory under the state directory's
// runs/ (DefaultStateDir), named by its run id, holding its ledger
// (package ledger: every resource recorded before it is created) and
// everything of the run that lives in files; hosts.json names the remote
// hosts it used, kinds.json the kinds of targets named otherwise; the
// state directory's runs.history and hosts.history outlive every run.
//
// Teardown walks a run's ledger newest first, here and over SSH on its
// remote hosts, removing each resource (processes only while they are the
// process recorded, mounts, sockets, directories, an Engine's containers,
// images and volumes, kernel parameters put back), keeping going past
// failures and reporting them all. The audit proves nothing is left: the
// ledgers' resources, what each target's Backend finds labelled with a
// run, mounts and processes under run directories, stray directories,
// and what is labelled on every remote host a run here ever used. A
// target's Backend (RegisterBackend, from provision.Register) reaches what
// the generic code cannot: a tool's VMs and images, labelled containers.
package runs
