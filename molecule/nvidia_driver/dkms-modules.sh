#!/bin/sh
# TEST HARNESS (molecule/nvidia_driver/prepare.yml): a dpkg post-invoke hook in the DKMS nodes of this
# scenario. After dpkg has unpacked a DKMS source tree of NVIDIA's (/usr/src/nvidia*/dkms.conf, from Debian's
# nvidia-kernel-dkms or Ubuntu's nvidia-dkms-<branch>-open) and before the package's postinst builds it, the
# package's dkms.conf moves to dkms.conf.packaged and a dkms.conf in its place sources it and keeps the records
# of nvidia and nvidia-peermem only, with make told to build those two (NV_KERNEL_MODULES, the list the tree's
# own Makefile takes: `NV_KERNEL_MODULES ?= $(wildcard nvidia nvidia-uvm ...)`, a command-line value wins).
# The tests read those two modules (the build, its signature, peermem at boot); nvidia-uvm, nvidia-modeset and
# nvidia-drm are about three quarters of each build's C files (Debian's 535: 140 of 188; Ubuntu's 580 open: 148
# of 208) and all the compiler's work on a machine with an empty compiler cache. The package's postinst, dkms
# (add, build, sign, install) and the role run as on a node; a node's dkms.conf is never touched by the role.
# dpkg runs the hook after every run (DPKG_HOOK_ACTION); apt unpacks and configures in separate runs. Should a
# run unpack and configure at once, the build is whole, only slower.
set -eu
case ${DPKG_HOOK_ACTION:-} in unpack | install) ;; *) exit 0 ;; esac
for conf in /usr/src/nvidia*/dkms.conf; do
  [ -f "$conf" ] || continue
  ! grep -q '^# TEST HARNESS' "$conf" || continue
  mv "$conf" "$conf.packaged"
  cat > "$conf" <<'EOF'
# TEST HARNESS (molecule/nvidia_driver/dkms-modules.sh): the package's dkms.conf (beside this file, .packaged),
# building nvidia and nvidia-peermem only
. "${BASH_SOURCE[0]}.packaged"
__harness_keep=()
for __harness_i in "${!BUILT_MODULE_NAME[@]}"; do
  case ${BUILT_MODULE_NAME[$__harness_i]} in nvidia | nvidia-peermem) __harness_keep+=("$__harness_i") ;; esac
done
for __harness_array in BUILT_MODULE_NAME BUILT_MODULE_LOCATION DEST_MODULE_NAME DEST_MODULE_LOCATION STRIP; do
  eval "__harness_set=\${${__harness_array}[0]+x}"
  [ -n "$__harness_set" ] || continue
  __harness_new=()
  for __harness_i in "${__harness_keep[@]}"; do
    eval "__harness_new+=(\"\${${__harness_array}[$__harness_i]-}\")"
  done
  eval "${__harness_array}=(\"\${__harness_new[@]}\")"
done
MAKE[0]="${MAKE[0]} NV_KERNEL_MODULES='nvidia nvidia-peermem'"
EOF
  echo "TEST HARNESS: $conf builds nvidia and nvidia-peermem only (the package's own: $conf.packaged)"
done
