#!/bin/sh
# T7: npm install --offline of 32 packages from local tarballs, with no
# scripts, audit or log file. npm's cache is in the workspace, so that
# every run starts from nothing. Node's file system calls run on one
# thread of its pool rather than four: with four, the order their
# requests reach the file system varies, and with it how many attribute
# requests the kernel sends LayerFS (1,032 to 1,061 in four samples, where
# one thread gives 965 every time, in the same time); every count must be
# exact.
# Base: setup-npm.sh's tgz/ and app/. Verifier: the 32 packages installed
# and loadable, the installed tree and the lock file exactly.
set -eu
cd app
UV_THREADPOOL_SIZE=1 npm install --offline --no-audit --no-fund --ignore-scripts --no-update-notifier --logs-max=0 --loglevel=error --cache "$PWD/../.npm-cache" >/dev/null
