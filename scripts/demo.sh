#!/usr/bin/env bash
# The main job on the embedded default: creates a local node container
# (Debian 12, docker and containerd inside) and provisions it with site.yml
# through inventories/local. Sets up what it needs on a fresh Debian/Ubuntu
# machine (as root): a Python venv, a Docker engine, the node image.
# Running it again re-uses the node: the second site.yml run changes nothing.
#   bash scripts/demo.sh                 # extra arguments go to ansible-playbook
#   docker rm -f -v gpunode-local        # remove the node afterwards
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

NODE=gpunode-local
REPORT_DIR=/var/lib/gpu-node-provisioning

ensure_venv
ensure_docker
ensure_images debian12

export PATH="$VENV/bin:$PATH"
note "creating the local node container $NODE"
ansible-playbook molecule/resources/local_node.yml
note "provisioning it with site.yml"
rc=0
ansible-playbook -i inventories/local site.yml "$@" || rc=$?

# The summary a newcomer reads: the doctor's table as the node has it, where
# the reports are, what to try next, how to remove the node, and what is a
# test stand-in here.
echo
echo "================================================================================"
if table=$(docker exec "$NODE" cat "$REPORT_DIR/validate.txt" 2>/dev/null); then
  echo "The doctor's checks of $NODE (playbooks/validate.yml, the last step of site.yml):"
  echo
  echo "$table"
else
  echo "The doctor wrote no report on $NODE: site.yml stopped before it (see the output above)."
fi
cat <<EOF

Reports, inside the node: $REPORT_DIR/validate.txt and validate.json
  docker exec $NODE cat $REPORT_DIR/validate.json
Look around:   docker exec -it $NODE bash
               docker exec $NODE ctr plugins ls            (containerd's CRI plugin: ok)
               docker exec $NODE cat /etc/docker/daemon.json
Run again:     bash scripts/demo.sh                          (the second run changes nothing)
Remove it:     docker rm -f -v $NODE

What is real and what is a stand-in here:
  - real: the node's systemd, docker, containerd and apt, and every config file
    the roles merged (daemon.json, containerd's config.toml, the toolkit's
    config.toml, the AppArmor and seccomp profiles, the fuse settings).
  - TEST STAND-IN: the NVIDIA container toolkit packages. NVIDIA's repository is
    not reachable from the build machines, so the demo builds a local signed
    apt repository of stand-in packages inside the node
    (tests/fixtures/nvidia-container-toolkit-standin) and trusts its key. They
    carry NVIDIA's real runtime, hook and nvidia-ctk (1.20.0, built from source:
    ../shared/upstream), so "container via nvidia" ran NVIDIA's runtime with
    the config.toml the role wrote (only nvidia-container-cli is a stand-in). On a
    real node the role installs NVIDIA's packages from NVIDIA's signed
    repository (or your mirror of it): see inventories/example.
  - no GPU: the node is a container, so the driver role skips it and the GPU
    checks say "skipped". Where the host kernel has no AppArmor, the AppArmor
    profile and "FUSE confinement" say "warn": SYS_ADMIN FUSE pods would not be
    confined there (roles/security_profiles/README.md shows the safer path).
EOF
if [ "$rc" -ne 0 ]; then
  echo
  echo "site.yml FAILED (exit code $rc): the output above names the task and the host." >&2
fi
exit "$rc"
