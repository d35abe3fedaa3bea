# shellcheck shell=bash
# Set-up shared by scripts/test.sh and scripts/demo.sh. Each step is idempotent
# and fast when already done: venv, Docker engine, node images.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
export GPUNODE_CACHE=${GPUNODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-node-provisioning}

# The directory of upstream builds: test inputs built from upstream source, never installed by a role (NVIDIA's
# container toolkit, CRI-O, containerd; a BUILD.md in each says how). One name, GPUNODE_UPSTREAM_DIR, read by
# molecule (.config/molecule/config.yml), the demo (molecule/resources/local_node.yml) and the tests. Default:
# ../shared/upstream next to the project where that exists, else the cache folder that scripts/build-upstream.sh
# builds into. resolve_upstream_dir exports it, absolute.
# nvidia-container-toolkit-arm64: the toolkit cross-built for arm64, in nvidia-container-toolkit/bin-arm64/. molecule/arm64
# packages it where it is there, and labelled script stand-ins where it is not (its test of the arm64 build says so
# and is skipped); only GPUNODE_TEST_ARM64=1 requires it.
UPSTREAM_COMPONENTS=(nvidia-container-toolkit nvidia-container-toolkit-arm64 cri-o containerd)

upstream_needed() {
  # upstream_needed : the components this test run needs, one a line
  local component
  for component in "${UPSTREAM_COMPONENTS[@]}"; do
    [ "$component" != nvidia-container-toolkit-arm64 ] || [ "${GPUNODE_TEST_ARM64:-0}" = 1 ] || continue
    echo "$component"
  done
}

resolve_upstream_dir() {
  if [ -z "${GPUNODE_UPSTREAM_DIR:-}" ]; then
    if [ -d "$ROOT/../shared/upstream" ]; then
      GPUNODE_UPSTREAM_DIR=$(cd "$ROOT/../shared/upstream" && pwd)
    else
      GPUNODE_UPSTREAM_DIR=$GPUNODE_CACHE/upstream
    fi
  fi
  export GPUNODE_UPSTREAM_DIR
}

upstream_missing() {
  # upstream_missing : the needed components that GPUNODE_UPSTREAM_DIR lacks (the file each BUILD.md names first), one
  # a line
  local component file
  for component in $(upstream_needed); do
    case $component in
      nvidia-container-toolkit) file=nvidia-container-toolkit/nvidia-container-runtime ;;
      nvidia-container-toolkit-arm64) file=nvidia-container-toolkit/bin-arm64/nvidia-container-runtime ;;
      cri-o) file=cri-o/bin/crio ;;
      containerd) file=containerd/bin/containerd ;;
    esac
    [ -x "$GPUNODE_UPSTREAM_DIR/$file" ] || echo "$component"
  done
}

ensure_upstream() {
  # The test command's first step: the components in GPUNODE_UPSTREAM_DIR, built from public source by
  # scripts/build-upstream.sh where they are missing and the source can be fetched; otherwise stop here, before
  # anything else, naming the variable, the script and the components.
  local missing
  resolve_upstream_dir
  missing=$(upstream_missing)
  [ -n "$missing" ] || return 0
  note "GPUNODE_UPSTREAM_DIR=$GPUNODE_UPSTREAM_DIR lacks: $(echo $missing); building from public source (scripts/build-upstream.sh)"
  if bash "$ROOT/scripts/build-upstream.sh" --check $missing; then
    bash "$ROOT/scripts/build-upstream.sh" $missing || die "scripts/build-upstream.sh failed (output above)"
    missing=$(upstream_missing)
    [ -z "$missing" ] && return 0
  fi
  die "the upstream builds the tests run are missing: $(echo $missing) (of $(echo $(upstream_needed))) in
GPUNODE_UPSTREAM_DIR=$GPUNODE_UPSTREAM_DIR, and their public source cannot be fetched from here.
Fix: set GPUNODE_UPSTREAM_DIR to a directory holding the builds (nvidia-container-toolkit/, with bin-arm64/ in it
for GPUNODE_TEST_ARM64=1, cri-o/bin/, containerd/bin/, as BUILD.md in each describes), or run scripts/build-upstream.sh where GitHub and
Debian's archive can be reached. Nothing was run."
}

die() {
  echo "ERROR: $*" >&2
  exit 1
}

note() { echo "==> $*"; }

is_root() { [ "$(id -u)" -eq 0 ]; }

have_apt() { command -v apt-get >/dev/null 2>&1; }

apt_install() {
  # apt_install PKG... : install Debian/Ubuntu packages as root, quietly
  is_root && have_apt || return 1
  if [ -z "${__GPUNODE_APT_UPDATED:-}" ]; then
    apt-get update -qq >/dev/null || return 1
    __GPUNODE_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

ensure_venv() {
  local want have
  # the test stack (requirements-test.txt, which includes requirements.txt): the demo and the tests use it
  want=$(cat "$ROOT/requirements.txt" "$ROOT/requirements-test.txt" | sha256sum | cut -c1-16)
  have=$(cat "$VENV/.requirements-hash" 2>/dev/null || true)
  if [ "$want" = "$have" ] && [ -x "$VENV/bin/python" ]; then
    return 0
  fi
  command -v python3 >/dev/null || die "python3 is missing: install Python 3.10 or newer."
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    apt_install python3-venv || die "python3 cannot create virtual environments: install python3-venv (as root: apt-get install python3-venv)."
  fi
  note "creating the Python environment in .venv (requirements-test.txt)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/requirements-test.txt" \
    || die "pip could not install requirements-test.txt into .venv (see the output above)"
  echo "$want" > "$VENV/.requirements-hash"
}

docker_answers() { docker info >/dev/null 2>&1; }

# where the engine this command starts logs
DOCKERD_LOG=${GPUNODE_DOCKERD_LOG:-/var/log/gpunode-dockerd.log}

ensure_docker() {
  if docker_answers; then
    return 0
  fi
  if ! is_root; then
    if command -v docker >/dev/null 2>&1; then
      die "no Docker engine answers ('docker info' failed) and this user ($(id -un)) is not root, so the engine cannot be installed or started here. Fix: start the Docker engine and make sure this user may use it (e.g. add it to the 'docker' group), or run this command as root."
    fi
    die "no Docker engine is installed and this user ($(id -un)) is not root, so none can be installed. Fix: install and start Docker (on Debian/Ubuntu as root: apt-get install docker.io), or run this command as root."
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    have_apt || die "no Docker engine is installed and this is not a Debian/Ubuntu system: install Docker, start it, then rerun."
    note "installing the Docker engine (docker.io)"
    apt_install docker.io || die "apt-get install docker.io failed"
  fi
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl start docker >/dev/null 2>&1 || true
  fi
  if ! docker_answers; then
    note "starting dockerd in the background (log: $DOCKERD_LOG)"
    # in a session of its own: the engine outlives this command, so a Ctrl-C of the tests (SIGINT to the terminal's
    # process group) or killing a run's process group does not take down the engine and every node on it
    setsid nohup dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
  fi
  local i
  for i in $(seq 1 60); do
    docker_answers && return 0
    sleep 1
  done
  tail -20 "$DOCKERD_LOG" >&2 2>/dev/null || true
  die "dockerd did not answer within 60 s (log above, $DOCKERD_LOG)"
}

ensure_ubuntu_keyring() {
  # Ubuntu's archive key, to build Ubuntu node roots with debootstrap. Debian ships it
  # as ubuntu-keyring from Debian 13 on; on Debian 12 it comes from Debian 13's archive,
  # fetched with apt (verified with Debian's archive key) and installed with dpkg.
  is_root && have_apt || return 0
  apt_install ubuntu-keyring 2>/dev/null && return 0
  note "installing ubuntu-keyring (Ubuntu's archive key) from Debian 13's archive"
  local d
  d=$(mktemp -d) && chmod 755 "$d" && mkdir -p "$d/lists/partial" "$d/cache/archives/partial" || return 1
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${GPUNODE_MIRROR:-http://deb.debian.org/debian} trixie main" > "$d/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d/cache" -o APT::Sandbox::User=root)
  if apt-get "${opts[@]}" update -qq >/dev/null && (cd "$d" && apt-get "${opts[@]}" download -qq ubuntu-keyring >/dev/null) \
     && dpkg -i "$d"/ubuntu-keyring_*.deb >/dev/null; then
    rm -rf "$d"
    return 0
  fi
  rm -rf "$d"
  die "could not install ubuntu-keyring (Ubuntu's archive key), needed to build the Ubuntu node images. Fix: install the package ubuntu-keyring (Debian 13 or newer, or Ubuntu)."
}

ensure_image_tools() {
  # ensure_image_tools NODE... : what building these node images needs. debootstrap is installed when root can;
  # otherwise the build script says what is missing, and only when an image really needs building. Ubuntu nodes need
  # Ubuntu's archive key (ensure_ubuntu_keyring). scripts/test.sh runs it once before the tests, which build their
  # images themselves; callers at once (the test command's workers) install one at a time, under one lock.
  local lock=
  mkdir -p "$GPUNODE_CACHE/locks"
  if command -v flock >/dev/null 2>&1; then
    exec {lock}>"$GPUNODE_CACHE/locks/image-tools.lock"
    flock "$lock"
  fi
  if ! command -v debootstrap >/dev/null 2>&1 && is_root; then
    apt_install debootstrap || die "debootstrap is missing and apt-get install debootstrap failed."
  fi
  case " $* " in
    *" ubuntu"*) [ -f /usr/share/keyrings/ubuntu-archive-keyring.gpg ] || ensure_ubuntu_keyring ;;
  esac
  [ -z "$lock" ] || exec {lock}>&-
}

ensure_images() {
  # ensure_images NODE... : build the node images that are missing or outdated. Safe to run several at once (the
  # test command's workers each ensure their scenario's images, the demo its own): one build of an image at a time,
  # under a lock of its own in GPUNODE_CACHE/locks; who waited for it finds it built (the build script's recipe check)
  # and builds nothing.
  ensure_image_tools "$@"
  # Up to GPUNODE_IMAGE_JOBS builds (default 3) of one call run at once (each call counts its own: the test command's
  # workers may build more at a moment on a new machine, each image once): a build waits on the archive (debootstrap's
  # downloads) about as much as it computes, so on a new machine, where every image is built, three at a time take less
  # time than one after another (docs/test-times.md). Each build's output is shown once it ends, so two builds' lines never mix; where
  # one fails, the command stops with its output once the builds already started have ended.
  local builder=${GPUNODE_IMAGE_BUILDER:-$ROOT/tests/fixtures/images/build-node-image.sh}
  local max=${GPUNODE_IMAGE_JOBS:-3} dir node running=() waiting=("$@") left=() failed=() pids=()
  case "$max" in '' | *[!0-9]* | 0) die "GPUNODE_IMAGE_JOBS must be a number of 1 or more, got '$max'." ;; esac
  dir=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-images.XXXXXX")
  # ensure_image_tools made the lock folder; without flock, no lock (said once)
  local locks=$GPUNODE_CACHE/locks have_flock=yes build=()
  if ! command -v flock >/dev/null 2>&1; then
    have_flock=
    echo "WARNING: flock (util-linux) is missing: two callers at once may build the same node image twice" >&2
  fi
  while [ "${#waiting[@]}" -gt 0 ] || [ "${#running[@]}" -gt 0 ]; do
    while [ "${#waiting[@]}" -gt 0 ] && [ "${#running[@]}" -lt "$max" ]; do
      node=${waiting[0]}
      waiting=("${waiting[@]:1}")
      (
        rc=0
        build=(bash "$builder" "$node")
        [ -z "$have_flock" ] || build=(flock -o "$locks/image-$node.lock" "${build[@]}")
        "${build[@]}" > "$dir/$node.out" 2> "$dir/$node.err" || rc=$?
        echo "$rc" > "$dir/$node.rc"
      ) &
      pids+=("$!")
      running+=("$node")
    done
    left=()
    for node in "${running[@]}"; do
      if [ -s "$dir/$node.rc" ]; then
        cat "$dir/$node.out"
        cat "$dir/$node.err" >&2
        [ "$(cat "$dir/$node.rc")" = 0 ] || { failed+=("$node"); waiting=(); }
      else
        left+=("$node")
      fi
    done
    running=("${left[@]}")
    [ "${#running[@]}" -eq 0 ] || sleep 1
  done
  # only the builds: a bare `wait` would also wait for what the caller runs in the background (ensure_docker's
  # dockerd, for the whole test command), and so never return
  [ "${#pids[@]}" -eq 0 ] || wait "${pids[@]}"
  rm -rf "$dir"
  [ "${#failed[@]}" -eq 0 ] || die "building node image ${failed[*]} failed"
}

ensure_chromium() {
  # ensure_chromium : the distribution's Chromium, which molecule/fleet renders the fleet report
  # in (headless). Installed only when it is missing, as root; otherwise say how.
  if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    return 0
  fi
  is_root && have_apt || die "Chromium is missing (molecule/fleet renders the fleet report in it). Fix: install the package chromium (Debian) or chromium-browser, as root."
  note "installing chromium (headless browser for molecule/fleet's fleet report)"
  apt_install chromium || die "apt-get install chromium failed; molecule/fleet needs it."
}

ensure_arm64_emulation() {
  # The arm64 node (Grace: GH200/GB200 are aarch64) runs under qemu-user: Debian's qemu-user-static, registered in
  # binfmt_misc with the fix-binary flag (F: the kernel opens the interpreter once, at registration, so a container
  # needs no copy of it). Idempotent: an existing qemu-aarch64 entry is kept as it is (the host's own, or ours).
  # Returns 1, saying why, where the kernel or the user cannot do it; the caller decides what that costs.
  local dir=/proc/sys/fs/binfmt_misc entry conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  if [ "$(uname -m)" = aarch64 ]; then
    return 0
  fi
  if [ -e "$dir/qemu-aarch64" ]; then
    if grep -qx enabled "$dir/qemu-aarch64" && grep -q '^flags:.*F' "$dir/qemu-aarch64"; then
      return 0
    fi
    echo "arm64 emulation: binfmt_misc has a qemu-aarch64 entry that is disabled or lacks the fix-binary flag (F); left as it is (see $dir/qemu-aarch64)" >&2
    return 1
  fi
  if ! is_root; then
    echo "arm64 emulation: qemu-aarch64 is not registered in binfmt_misc and this user ($(id -un)) is not root. Fix: as root, apt-get install qemu-user-static and register it with the F flag (systemd-binfmt or update-binfmts)." >&2
    return 1
  fi
  if [ ! -e "$dir/register" ]; then
    mount -t binfmt_misc binfmt_misc "$dir" 2>/dev/null || true
  fi
  if [ ! -e "$dir/register" ]; then
    echo "arm64 emulation: the kernel offers no binfmt_misc here ($dir/register is missing and mounting binfmt_misc failed: a kernel without CONFIG_BINFMT_MISC, or a container without the right to mount it)." >&2
    return 1
  fi
  if [ ! -x /usr/bin/qemu-aarch64-static ] && [ ! -x /usr/libexec/qemu-binfmt/aarch64-binfmt-P ]; then
    note "installing qemu-user-static (arm64 node under emulation)"
    apt_install qemu-user-static || { echo "arm64 emulation: apt-get install qemu-user-static failed" >&2; return 1; }
  fi
  # Debian's own entry (its package writes it for systemd-binfmt, flags OPF), else one of our own with the F flag
  if [ -f "$conf" ] && grep -q ':[A-Z]*F[A-Z]*$' "$conf"; then
    entry=$(cat "$conf")
  else
    entry=':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F'
  fi
  if ! printf '%s' "$entry" > "$dir/register" 2>/dev/null; then
    echo "arm64 emulation: the kernel refused to register qemu-aarch64 in $dir/register (a read-only or namespaced binfmt_misc)." >&2
    return 1
  fi
  note "registered qemu-aarch64 in binfmt_misc (flags: $(sed -n 's/^flags: //p' "$dir/qemu-aarch64"))"
}

ensure_inotify() {
  # Every node container runs systemd, containerd and dockerd, and each takes inotify instances of root's
  # one per-user budget (fs.inotify.max_user_instances, 128 by default): with three workers running scenarios at
  # once containerd's CRI plugin failed to load ("failed to create fsnotify watcher: too many open files").
  # Raise the limits as root when they are lower (a running system keeps them until reboot).
  local key want have
  is_root || return 0
  for key in max_user_instances:1024 max_user_watches:524288; do
    want=${key#*:}
    have=$(cat "/proc/sys/fs/inotify/${key%%:*}" 2>/dev/null || echo "$want")
    if [ "$have" -lt "$want" ]; then
      note "raising fs.inotify.${key%%:*} from $have to $want (node containers run systemd, containerd and dockerd)"
      echo "$want" > "/proc/sys/fs/inotify/${key%%:*}" || true
    fi
  done
}

