#!/usr/bin/env bash
# Builds the upstream test inputs into GPUNODE_UPSTREAM_DIR from their public source: the recipes of the
# BUILD.md files that come with those builds (pinned commit, vendored dependencies, Go from Debian's archive),
# as a script. Test inputs only: the molecule scenarios copy them into node containers; a role never installs them.
#
#   bash scripts/build-upstream.sh [COMPONENT...]          build them (default: all three)
#   bash scripts/build-upstream.sh --check [COMPONENT...]  exit 0 when every source can be fetched, 2 when not
#   bash scripts/build-upstream.sh --dry-run [COMPONENT...] print what would be fetched and run
#
# Components: nvidia-container-toolkit, nvidia-container-toolkit-arm64 (the same four binaries cross-built for
# arm64 with GOARCH=arm64 and Debian's aarch64 cross gcc: Go needs no emulation; they land in
# nvidia-container-toolkit/bin-arm64/), cri-o, containerd. Each is fetched at its pinned commit, built in a
# throwaway container of a Debian node image (gpunode:debian11: glibc 2.31, so the binaries run on every node
# image), and its binaries land in $GPUNODE_UPSTREAM_DIR/<component>/ with a BUILD.md saying how. A component is
# written only when its build succeeded: a failed build leaves the directory as it was.
#
# GPUNODE_UPSTREAM_GIT (default https://github.com): where the source repositories are, e.g. a local mirror
# holding <owner>/<name>.git. GPUNODE_MIRROR: the Debian mirror the Go packages come from.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GIT_BASE=${GPUNODE_UPSTREAM_GIT:-https://github.com}
DEBIAN_MIRROR=${GPUNODE_MIRROR:-http://deb.debian.org/debian}

# The recipes. Pins as the BUILD.md of each build records them (test inputs of 2026-11-27):
# component | repository | commit | version | Debian suite and Go package
recipe() {
  case $1 in
    nvidia-container-toolkit | nvidia-container-toolkit-arm64)
      echo "NVIDIA/nvidia-container-toolkit d34b3046758cb1a5db606b2a39519c731bbf9f56 1.20.0 trixie-backports golang-1.25" ;;
    cri-o)
      echo "cri-o/cri-o 7d91b78fc79e2cd764eba15ead350984479be98f 1.35.6 trixie-backports golang-1.25" ;;
    containerd)
      echo "containerd/containerd db8809540e1a7a9da5d518876894933ff55692ab v2.3.4 sid golang-1.26" ;;
    cri-tools)  # crictl, built with cri-o
      echo "kubernetes-sigs/cri-tools 46c81013b00ea238cd39499df021441ae51ec65f 1.35.0 trixie-backports golang-1.25" ;;
    *) return 1 ;;
  esac
}

sources_of() {  # the repositories a component is built from
  case $1 in
    cri-o) echo "cri-o cri-tools" ;;
    nvidia-container-toolkit-arm64) echo nvidia-container-toolkit ;;
    *) echo "$1" ;;
  esac
}

fetch_source() {
  # fetch_source URL COMMIT DEST : DEST holds URL's tree at COMMIT (and nothing else is fetched)
  local url=$1 commit=$2 dest=$3
  rm -rf "$dest"
  git init -q "$dest"
  git -C "$dest" fetch -q --depth 1 "$url" "$commit" 2>/dev/null \
    || git -C "$dest" fetch -q "$url" 2>/dev/null \
    || { echo "cannot fetch $url" >&2; return 1; }
  git -C "$dest" -c advice.detachedHead=false checkout -q "$commit" 2>/dev/null \
    || { echo "commit $commit is not in $url" >&2; return 1; }
  [ "$(git -C "$dest" rev-parse HEAD)" = "$commit" ]
}

source_reachable() {
  # source_reachable URL : the repository answers (git ls-remote; 30 s at most)
  timeout 30 git ls-remote -q "$1" HEAD >/dev/null 2>&1
}

dest_of() {  # where a component's build lands, under GPUNODE_UPSTREAM_DIR
  case $1 in
    nvidia-container-toolkit-arm64) echo nvidia-container-toolkit/bin-arm64 ;;
    *) echo "$1" ;;
  esac
}

build_commands() {
  # build_commands COMPONENT : the shell run in the build container (/src/<repo name>, Go on PATH, output /out)
  case $1 in
    nvidia-container-toolkit | nvidia-container-toolkit-arm64)
      [ "$1" = nvidia-container-toolkit ] || echo "export GOARCH=arm64 CC=aarch64-linux-gnu-gcc"
      cat <<'EOF'
cd /src/nvidia-container-toolkit
pkg=github.com/NVIDIA/nvidia-container-toolkit
ext="-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files -Wl,-z,lazy"
for name in nvidia-ctk nvidia-container-runtime nvidia-container-runtime-hook nvidia-cdi-hook; do
  CGO_ENABLED=1 go build -ldflags "-s -w '-extldflags=$ext' -X $pkg/internal/info.gitCommit=$COMMIT -X $pkg/internal/info.version=$VERSION" -o /out/$name $pkg/cmd/$name
done
cp LICENSE /out/
EOF
      ;;
    cri-o)
      cat <<'EOF'
cd /src/cri-o
export CGO_ENABLED=1
make bin/pinns
make bin/crio BUILDTAGS="containers_image_ostree_stub containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper seccomp apparmor selinux libsqlite3 static netgo osusergo" EXTRA_LDFLAGS='-linkmode external -extldflags "-static -lm"'
mkdir -p /out/bin /out/tools /out/contrib
cp bin/crio bin/pinns /out/bin/
cp contrib/systemd/crio.service /out/contrib/
cp LICENSE /out/
./bin/crio -d "" --config="" config > /out/crio-config-default.toml
cd /src/cri-tools
CGO_ENABLED=0 go build -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=1.35.0" -o /out/tools/crictl ./cmd/crictl
cp LICENSE /out/tools/LICENSE.cri-tools
EOF
      ;;
    containerd)
      cat <<'EOF'
cd /src/containerd
mod=github.com/containerd/containerd/v2
CGO_ENABLED=0 go build -o /out/bin/ -tags "urfave_cli_no_docs osusergo netgo static_build no_btrfs" -ldflags "-X $mod/version.Version=$VERSION -X $mod/version.Revision=$COMMIT -X $mod/version.Package=$mod -s -w" ./cmd/containerd ./cmd/ctr ./cmd/containerd-shim-runc-v2
cp LICENSE NOTICE containerd.service /out/
/out/bin/containerd config default > /out/config-default-v4.toml
EOF
      ;;
  esac
}

build_packages() {  # Debian packages the build container needs besides Go
  case $1 in
    cri-o) echo "make gcc libc6-dev pkg-config libseccomp-dev libsqlite3-dev libgpgme-dev" ;;
    nvidia-container-toolkit) echo "gcc libc6-dev" ;;
    nvidia-container-toolkit-arm64) echo "gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
    *) echo "" ;;
  esac
}

main() {
  local mode=build components=() component repo commit version suite go name
  work=  # global: the EXIT trap removes it after main has returned
  while [ $# -gt 0 ]; do
    case $1 in
      --check) mode=check ;;
      --dry-run) mode=dry-run ;;
      -h | --help) sed -n '2,17p' "$0"; return 0 ;;
      *) recipe "$1" >/dev/null || die "unknown component '$1' (known: ${UPSTREAM_COMPONENTS[*]})"; components+=("$1") ;;
    esac
    shift
  done
  [ ${#components[@]} -gt 0 ] || components=("${UPSTREAM_COMPONENTS[@]}")
  resolve_upstream_dir

  local unreachable=()
  for component in "${components[@]}"; do
    for name in $(sources_of "$component"); do
      read -r repo commit version suite go < <(recipe "$name")
      if [ "$mode" = dry-run ]; then
        echo "$component: fetch $GIT_BASE/$repo at $commit ($version); Go from Debian $suite ($go-go, $go-src);" \
          "build in gpunode:debian11 into $GPUNODE_UPSTREAM_DIR/$(dest_of "$component")"
      elif ! source_reachable "$GIT_BASE/$repo.git"; then
        unreachable+=("$GIT_BASE/$repo.git")
      fi
    done
  done
  [ "$mode" = dry-run ] && return 0
  if [ ${#unreachable[@]} -gt 0 ]; then
    echo "build-upstream.sh: cannot reach ${unreachable[*]} (set GPUNODE_UPSTREAM_GIT to a mirror)" >&2
    return 2
  fi
  [ "$mode" = check ] && return 0

  ensure_docker
  ensure_images debian11
  work=$(mktemp -d "${TMPDIR:-/tmp}/build-upstream.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  for component in "${components[@]}"; do
    note "building $component from source"
    mkdir -p "$work/$component/src" "$work/$component/out" "$work/$component/go"
    for name in $(sources_of "$component"); do
      read -r repo commit version suite go < <(recipe "$name")
      fetch_source "$GIT_BASE/$repo.git" "$commit" "$work/$component/src/$name" || die "fetching $repo failed"
    done
    read -r repo commit version suite go < <(recipe "$component")
    fetch_go "$suite" "$go" "$work/$component/go"
    local prep="true"
    [ -z "$(build_packages "$component")" ] \
      || prep="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(build_packages "$component") >/dev/null"
    docker run --rm -v "$work/$component/src:/src" -v "$work/$component/out:/out" \
      -v "$work/$component/go:/go-root:ro" -e COMMIT="$commit" -e VERSION="$version" \
      -e PATH="/go-root/usr/lib/go-${go#golang-}/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      -e GOFLAGS="-mod=vendor -trimpath" -e GOTOOLCHAIN=local -e GOPROXY=off -e GOCACHE=/tmp/go-cache \
      gpunode:debian11 bash -euo pipefail -c "$prep; $(build_commands "$component")" \
      || die "building $component failed (output above); $GPUNODE_UPSTREAM_DIR/$component is unchanged"
    printf '# %s %s, built by scripts/build-upstream.sh\n\nSource: %s/%s at %s; Go %s from Debian %s.\n' \
      "$component" "$version" "$GIT_BASE" "$repo" "$commit" "$go" "$suite" > "$work/$component/out/BUILD.md"
    (cd "$work/$component/out" && printf '\n| binary | sha256 |\n|---|---|\n' && for name in nvidia-*; do
      [ -f "$name" ] && printf '| %s | %s |\n' "$name" "$(sha256sum < "$name" | cut -d' ' -f1)"; done) \
      >> "$work/$component/out/BUILD.md" || true
    local dest
    dest=$GPUNODE_UPSTREAM_DIR/$(dest_of "$component")
    mkdir -p "$(dirname "$dest")"
    rm -rf "$dest.new"
    cp -a "$work/$component/out" "$dest.new"
    # the amd64 toolkit keeps the arm64 build that lives inside it
    [ ! -d "$dest/bin-arm64" ] || [ -e "$dest.new/bin-arm64" ] || mv "$dest/bin-arm64" "$dest.new/bin-arm64"
    rm -rf "$dest"
    mv "$dest.new" "$dest"
    note "built $component into $dest"
  done
}

fetch_go() {
  # fetch_go SUITE GO DEST : Debian's GO-go and GO-src from SUITE, unpacked into DEST (apt, verified with Debian's
  # archive key; the host's packages are not changed)
  local suite=$1 go=$2 dest=$3 d
  d=$(mktemp -d)
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR $suite main" > "$d/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$d/lists"
    -o "Dir::Cache=$d/cache" -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" update -qq >/dev/null && (cd "$d" && apt-get "${opts[@]}" download -qq "$go-go" "$go-src" >/dev/null) \
    || die "could not download $go-go and $go-src from Debian $suite ($DEBIAN_MIRROR)"
  local deb
  for deb in "$d"/*.deb; do dpkg -x "$deb" "$dest"; done
  rm -rf "$d"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
