#!/bin/bash
# usage: scripts/worktree-run.sh WORKTREE CMD...   (as root; for helpers building in parallel)
# Runs CMD inside a private mount namespace where WORKTREE is mounted at /work/main, so that a
# copy of main's .build (absolute paths) is reused without rebuilding dependencies, with a private
# TMPDIR so that SwiftPM's build lock (named after the path) does not queue on other worktrees.
wt=$(readlink -f "$1"); shift
name=$(basename "$wt")
mkdir -p "/tmp/tmp-$name"
exec unshare -m bash -c 'mount --bind "$0" /work/main && cd /work/main && export TMPDIR="/tmp/tmp-$1" && shift && exec "$@"' "$wt" "$name" "$@"
