# shellcheck shell=bash
# Installs missing Debian packages (we run as root on Debian/Ubuntu), quietly,
# running `apt-get update` at most once per call.
ensure_packages() {
    local missing=()
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing packages: ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
        return 1
    fi
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt_get update -qq >/dev/null || { echo "apt-get update failed" >&2; return 1; }
    apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || { echo "apt-get install ${missing[*]} failed" >&2; return 1; }
}

# apt-get under the lock every apt-get of the project's scripts takes
# (scripts/softroce-vm and scripts/testbed too): scripts/test prepares the
# VMs' and the release checks' packages in the background while the test bed
# may be installing its own, and apt-get fails at once on a held lock.
APT_LOCK=/var/lock/fabricbench-apt.lock
apt_get() {
    flock -w 1200 "$APT_LOCK" apt-get "$@"
}

# Makes sure cargo is on PATH (rustup installs it under ~/.cargo/bin).
ensure_cargo() {
    if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust (https://rustup.rs)" >&2; return 1; }
}

# What building fabricbench needs: a C toolchain, and cmake + libclang for
# rdma-mummy-sys (its libibverbs loader and bindings; libibverbs itself is
# opened at run time, not linked).
BUILD_PACKAGES=(gcc pkg-config cmake libclang-dev clang)
ensure_build_deps() {
    ensure_packages "${BUILD_PACKAGES[@]}"
}
