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

resolve_upstream_dir
[ -x "$GPUNODE_UPSTREAM_DIR/nvidia-container-toolkit/nvidia-container-runtime" ] || GPUNODE_UPSTREAM_DIR=
ensure_venv
ensure_docker
ensure_images debian12

# the -e options (e.g. your mirror: -e nvidia_container_toolkit_repo_base_url=...) also tell the node's set-up
# which toolkit repository to try first
extra=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    -e | --extra-vars) extra+=("${args[i]}" "${args[i + 1]:-}"); i=$((i + 1)) ;;
    -e* | --extra-vars=*) extra+=("${args[i]}") ;;
  esac
done

export PATH="$VENV/bin:$PATH"
note "creating the local node container $NODE"
ansible-playbook molecule/resources/local_node.yml ${extra[@]+"${extra[@]}"}
source_text=$(sed -n 's/^demo_toolkit_source_text: "\(.*\)"$/\1/p' inventories/local/host_vars/$NODE/toolkit.yml)
note "NVIDIA's container toolkit: $source_text"
note "provisioning it with site.yml"
rc=0
# the inventory file, not its folder: the doctor writes its fleet report (gpu-fleet-report.*) beside it, which
# ansible would otherwise try to parse as an inventory on the next run
ansible-playbook -i inventories/local/hosts.yml site.yml "$@" || rc=$?

# The summary a newcomer reads: the doctor's table as the node has it, where
# the reports are, what to try next, how to remove the node, and what is a
# test stand-in here.
echo
echo "================================================================================"
if table=$(docker exec "$NODE" cat "$REPORT_DIR/validate.txt" 2>/dev/null); then
  echo "The doctor's checks of $NODE (gpu_validate, the last step of site.yml; alone: playbooks/validate.yml):"
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
  - NVIDIA's container toolkit came from: $source_text.
    The demo takes the first that works: NVIDIA's signed repository (or your
    mirror: -e nvidia_container_toolkit_repo_base_url=...), else a local signed
    apt repository of TEST STAND-IN packages built inside the node
    (tests/fixtures/nvidia-container-toolkit-standin) carrying NVIDIA's own
    runtime, hook and nvidia-ctk from the upstream builds' directory
    (GPUNODE_UPSTREAM_DIR, default ../shared/upstream), else the same packages
    with labelled script stand-ins. The doctor's "container toolkit" row says
    which the node has. On a real node the role installs NVIDIA's packages from
    NVIDIA's signed repository (or your mirror of it): see inventories/example.
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
