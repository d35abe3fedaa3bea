#!/bin/sh
# TEST HARNESS (molecule/nvidia_driver/prepare.yml puts it in the place of the kernel's compiler for NVIDIA's
# conftest probes only): a result cache for those probes, which ccache cannot serve.
#
# NVIDIA's conftest.sh (in the driver's kernel module source) tells what the kernel offers by compiling several
# hundred small files, each written as conftest<PID>.c in the build directory and compiled with
# `$CC $CFLAGS -c conftest<PID>.c > /dev/null 2>&1`; a probe's answer is whether conftest<PID>.o appeared (the .o is
# then removed, never read). Many probes are meant to fail, and each file and its -DKBUILD_BASENAME carry the PID, so
# ccache (which hashes the input's name and caches no failed compile) never hits: in a run of molecule/nvidia_driver
# those compiles were 732 cc1 runs and 251 CPU s (process accounting, 2026-11-30), about a quarter of the scenario.
#
# This keeps each probe's outcome (exit status, stderr, the .o) under a key made of the compiler's version, the
# arguments, the source, the files given to -include and conftest/headers.h (the header probes' answers the source
# includes), all with every PID taken out (`conftest<digits>`: the probe's own, and the one in the CFLAGS, which
# conftest.sh's build_cflags prints as -DKBUILD_BASENAME="#conftest$$" from another shell once a build: Kbuild's
# NV_CFLAGS_FROM_CONFTEST, nvidia-kernel-dkms 535.309.01 Kbuild line 168 and conftest.sh line 90); the kernel
# headers are named by their versioned path in the arguments. A probe with the same key is answered from the cache;
# anything else (no conftest*.c input, no -c, an -o, -E, -S or a dependency option) goes to the compiler as it is.
#   conftest-cache.sh <compiler> <arguments...>      # GPUNODE_CONFTEST_CACHE: the cache directory
set -u

cc=$1
shift
dir=${GPUNODE_CONFTEST_CACHE:-/var/cache/gpunode-ccache/conftest}
src=
compile=false
for arg; do
  case $arg in
    conftest*.c) src=$arg ;;
    -c) compile=true ;;
    -E | -S | -o* | -M* | -Wp,-M*) exec "$cc" "$@" ;;
  esac
done
if [ -z "$src" ] || [ "$compile" != true ] || [ ! -f "$src" ] || [ "${src#*/}" != "$src" ]; then
  exec "$cc" "$@"
fi
base=${src%.c}

included=
previous=
for arg; do
  [ "$previous" = -include ] && included="$included $arg"
  previous=$arg
done
key=$(
  {
    "$cc" --version 2> /dev/null | head -n 1
    printf '%s\n' "$@"
    cat "$src"
    # shellcheck disable=SC2086 # the -include files, one word each
    [ -z "$included" ] || cat $included 2> /dev/null
    cat conftest/headers.h 2> /dev/null
  } | sed -E 's/conftest[0-9]+/conftestPID/g' | sha256sum | cut -d ' ' -f 1
) || exec "$cc" "$@"
entry=$dir/$key

if [ -f "$entry.rc" ]; then
  [ ! -f "$entry.o" ] || cp "$entry.o" "$base.o"
  [ ! -f "$entry.err" ] || cat "$entry.err" >&2
  exit "$(cat "$entry.rc")"
fi

{ mkdir -p "$dir" && [ -w "$dir" ]; } 2> /dev/null || exec "$cc" "$@"
"$cc" "$@" 2> "$entry.err.$$"
rc=$?
cat "$entry.err.$$" >&2
# the .o and stderr first, the exit status last: an entry counts once its .rc is there (each part renamed into place,
# so a probe of the same key running at the same moment reads a whole entry or none)
{
  if [ -f "$base.o" ]; then cp "$base.o" "$entry.o.$$" && mv -f "$entry.o.$$" "$entry.o"; else rm -f "$entry.o"; fi
  mv -f "$entry.err.$$" "$entry.err" && echo "$rc" > "$entry.rc.$$" && mv -f "$entry.rc.$$" "$entry.rc"
} 2> /dev/null || rm -f "$entry.err.$$" "$entry.o.$$" "$entry.rc.$$"
exit "$rc"
