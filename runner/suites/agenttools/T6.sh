#!/bin/sh
# T6: cargo build --offline of a library crate of 64 modules with no
# dependencies (a debug build, as an agent's edit-compile loop runs it, but
# not incremental: rustc's incremental cache names its sessions by time and
# differs by a byte or so from build to build, and every count must be
# exact), and in one codegen unit: with the default 16, rustc's threads
# write and remove 16 object files side by side, and their timing moved one
# attribute request in 1 of 13 samples (GETATTR 144 or 145); with one unit
# the requests are the same every time, and the build takes about 1.2 s
# instead of 0.85. Cargo's home is in the workspace, so that every run
# starts from nothing.
# Base: setup-cargo.sh's crate/. Verifier: the library built, its 64
# modules' functions compiled into it, the sources unchanged.
set -eu
cd crate
CARGO_HOME=$PWD/../.cargo-home CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_CODEGEN_UNITS=1 cargo build --offline --quiet
