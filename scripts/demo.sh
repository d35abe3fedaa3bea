#!/usr/bin/env bash
# The main job on the embedded default: creates a local node container
# (Debian 12, docker and containerd inside) and provisions it with site.yml
# through inventories/local. Sets up what it needs on a fresh Debian/Ubuntu
# machine (as root): a Python venv, a Docker engine, the node image.
#   bash scripts/demo.sh                 # extra arguments go to ansible-playbook
#   docker rm -f -v gpunode-local        # remove the node afterwards
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_venv
ensure_docker
ensure_images debian12

export PATH="$VENV/bin:$PATH"
note "creating the local node container gpunode-local"
ansible-playbook molecule/resources/local_node.yml
note "provisioning it with site.yml"
exec ansible-playbook -i inventories/local site.yml "$@"
