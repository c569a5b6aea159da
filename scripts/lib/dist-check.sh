# shellcheck shell=bash
# `scripts/dist --check`: the release binaries run where they claim.
# - readelf: no glibc symbol newer than 2.17, no shared library beyond
#   glibc's own and libgcc_s (libibverbs is dlopened, never NEEDED);
# - x86_64 natively and aarch64 under qemu-user: --version, probe, plan and
#   a real 3 -> 1 fan-in on local ranks (workers included) with the shipped
#   hostfiles/local and scenarios/fan-in.toml, every flow's bytes accounted;
# - the .deb installed with dpkg -i in a fresh Debian minbase root, where
#   `fabricbench --version` and `man fabricbench` work; the .rpm, the
#   tarballs and SHA256SUMS hold what they should.
# The Soft-RoCE VM run of the x86_64 binary is scripts/test-rdma's
# three-VM fan-in, given FABRICBENCH_BIN (it reuses that boot).

GLIBC_FLOOR=2.17
# glibc's own libraries, the loader, and libgcc_s (Rust's unwinder).
ALLOWED_NEEDED='^(libc|libm|libpthread|libdl|librt|libgcc_s)\.so\.[0-9]+$|^ld-linux[-a-z0-9_]*\.so\.[0-9]+$'
# The acceptance kit, as the packages must hold it.
KIT=(scenarios/acceptance/{tcp-all-pairs,rdma-all-pairs,gpu-all-pairs,rdma-incast-sweep}.toml hostfiles/examples/rails-64x8 hostfiles/examples/rails-64x8.topology.toml)
# A pristine minbase root, made once (about 200 MB) and copied for each check.
MINBASE=/var/cache/fabricbench-dist/minbase-bookworm
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export QEMU_LD_PREFIX

ensure_check_tools() {
    ensure_packages binutils python3 qemu-user libc6-arm64-cross debootstrap rpm
    ensure_aarch64_binfmt
}

# The kernel runs aarch64 ELF files with qemu-aarch64, so the workers the
# launcher starts as its own /proc/self/exe run emulated as well. F: the
# kernel opens the interpreter now, so it works in any mount namespace.
ensure_aarch64_binfmt() {
    local dir=/proc/sys/fs/binfmt_misc
    [ -e "$dir/register" ] || mount -t binfmt_misc binfmt_misc "$dir" \
        || { echo "dist --check: cannot mount binfmt_misc on $dir (needs a privileged root)" >&2; return 1; }
    local entry
    for entry in "$dir"/qemu-aarch64 "$dir"/fabricbench-aarch64; do
        [ -e "$entry" ] && grep -qx enabled "$entry" && return 0
    done
    printf '%s' ':fabricbench-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64:F' \
        >"$dir/register"
}

fail() {
    echo "dist --check: FAILED: $*" >&2
    exit 1
}

# No glibc symbol version above the floor, no library beyond the allowed.
check_linkage() {
    local bin=$1 newest lib
    newest=$(readelf --dyn-syms -W "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
    [ -n "$newest" ] || fail "$bin: no GLIBC_ symbol versions (is it a glibc binary?)"
    [ "$(printf '%s\n%s\n' "$newest" "$GLIBC_FLOOR" | sort -V | tail -n 1)" = "$GLIBC_FLOOR" ] \
        || fail "$bin needs glibc $newest, above the floor $GLIBC_FLOOR ($(readelf --dyn-syms -W "$bin" | grep -o "[^ ]*@GLIBC_$newest" | head -n 3 | tr '\n' ' '))"
    while read -r lib; do
        [[ "$lib" =~ $ALLOWED_NEEDED ]] || fail "$bin needs $lib, beyond glibc and libgcc_s"
    done < <(readelf -d -W "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    echo "dist --check: $bin: highest glibc symbol $newest, NEEDED $(readelf -d -W "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')" >&2
}

# --version, probe, plan and a shortened fan-in on the four local ranks;
# rates are not asserted (under emulation they mean nothing).
check_runs() {
    local bin=$1 version=$2 work out
    work=$(mktemp -d)
    out=$("$bin" --version) || fail "$bin --version failed"
    [ "$out" = "fabricbench $version" ] || fail "$bin --version said '$out', expected 'fabricbench $version'"
    # Without rdma-core (here, and always under qemu) probe says so and exits 1; a crash is >1.
    local rc=0
    "$bin" probe >"$work/probe" 2>&1 || rc=$?
    [ "$rc" -le 1 ] || fail "$bin probe exited $rc: $(cat "$work/probe")"
    "$bin" plan scenarios/fan-in.toml -H hostfiles/local >"$work/plan" || fail "$bin plan failed"
    [ "$(grep -c -- '-> 0 (' "$work/plan")" = 3 ] || fail "$bin plan: expected 3 flows into rank 0: $(cat "$work/plan")"
    # Exit 4 is the run refusing a window a rank was held up in (degraded):
    # the aarch64 binary runs under qemu-user, and a busy host held one up
    # 1.25 s once. Once more then; a second one fails.
    local attempt rc
    for attempt in 1 2; do
        rc=0
        timeout 120 "$bin" run scenarios/fan-in.toml -H hostfiles/local --duration 2s --warmup 1s --no-save \
            --no-progress --quiet --export-json "$work/run.json" 2>"$work/err" || rc=$?
        if [ "$rc" != 4 ] || [ "$attempt" = 2 ]; then break; fi
        echo "dist --check: $bin fan-in degraded (exit 4): once more. $(grep -m1 degraded "$work/err")" >&2
    done
    [ "$rc" = 0 ] || fail "$bin fan-in exited $rc: $(tail -n 20 "$work/err")"
    python3 - "$work/run.json" <<'EOF' || fail "$bin fan-in: $(cat "$work/err")"
import json, sys
run = json.load(open(sys.argv[1]))
phase = run["phases"][0]
assert phase["complete"] is True, f"phase not complete: {phase['name']}"
flows = phase["flows"]
assert sorted(f["src"] for f in flows) == [1, 2, 3] and {f["dst"] for f in flows} == {0}, flows
for f in flows:
    tx, rx = f["tx_bytes"], f["rx_bytes"]
    # Each end counts at its own window boundaries, with at most the socket
    # buffers in flight between them (tests/it/tcp_data_plane.rs proves the
    # stream end to end): every byte is accounted within that.
    assert tx > 0 and rx > 0, f"flow {f['id']} moved nothing: {f}"
    assert abs(rx - tx) <= max(tx // 10, 8 << 20), f"flow {f['id']}: sent {tx}, received {rx}"
    print(f"flow {f['id']}: {f['src']} -> 0 sent {tx} B, received {rx} B")
EOF
    rm -rf "$work"
}

minbase_template() {
    [ -x "$MINBASE/usr/bin/man" ] && return 0
    echo "dist --check: making a Debian minbase root in $MINBASE (once)" >&2
    rm -rf "$MINBASE.tmp"
    mkdir -p "$(dirname "$MINBASE")"
    debootstrap --variant=minbase --include=man-db bookworm "$MINBASE.tmp" http://deb.debian.org/debian >/dev/null \
        || fail "debootstrap of a minbase root failed"
    mv "$MINBASE.tmp" "$MINBASE"
}

# dpkg -i in a fresh copy of the minbase root: the package's dependencies
# are what a bare Debian has, and man finds the page it installs.
check_deb_install() {
    local deb=$1 root out page
    minbase_template
    root=$(mktemp -d)
    cp -a "$MINBASE/." "$root/"
    cp "$deb" "$root/tmp/"
    chroot "$root" dpkg -i "/tmp/$(basename "$deb")" >/dev/null || fail "dpkg -i $deb in a minbase root failed"
    out=$(chroot "$root" fabricbench --version) || fail "fabricbench --version in the minbase root failed"
    echo "dist --check: installed $(basename "$deb") in a minbase root: $out" >&2
    page=$(chroot "$root" env MANPAGER=cat MANWIDTH=80 man fabricbench 2>&1) || true
    grep -q 'fabricbench - Benchmark' <<<"$page" \
        || fail "man fabricbench in the minbase root: $(chroot "$root" env MANPAGER=cat man fabricbench 2>&1 | head -n 5)"
    # An installed scenario by its name, on an installed hostfile, from a
    # folder that holds neither. The binary finds its share folder through
    # /proc/self/exe, as on any host: a proc of its own, gone with it.
    out=$(unshare --mount --pid --fork --mount-proc="$root/proc" chroot "$root" \
        sh -c 'cd /tmp && fabricbench plan acceptance/tcp-all-pairs -H /usr/share/fabricbench/hostfiles/local' 2>&1) \
        || fail "fabricbench plan acceptance/tcp-all-pairs in the minbase root: $out"
    grep -q "round 3/3" <<<"$out" || fail "plan acceptance/tcp-all-pairs in the minbase root: no third round of the four hosts: $out"
    echo "dist --check: the installed acceptance/tcp-all-pairs plans by name" >&2
    rm -rf "$root"
}

check_packages() {
    local dist=$1 version=$2 arch rpmarch name listing
    for arch in x86_64 aarch64; do
        name=fabricbench-$version-$arch-linux-gnu
        # Listings are read whole first: `tar | grep -q` under pipefail
        # fails when grep stops reading at its first match (SIGPIPE).
        listing=$(tar -tzf "$dist/$name.tar.gz") || fail "$name.tar.gz cannot be read"
        for want in fabricbench README.md LICENSE-MIT LICENSE-APACHE docs/ACCEPTANCE.md scenarios/fan-in.toml \
            "${KIT[@]}" hostfiles/local profiles/tcp-loopback.toml fabricbench.1; do
            grep -qx "$name/$want" <<<"$listing" || fail "$name.tar.gz holds no $name/$want"
        done
        rpmarch=$arch
        rpm -qp --qf '%{ARCH}\n' "$dist/fabricbench-$version-1.$rpmarch.rpm" 2>/dev/null | grep -qx "$rpmarch" \
            || fail "fabricbench-$version-1.$rpmarch.rpm is not $rpmarch"
        listing=$(rpm -qpl "$dist/fabricbench-$version-1.$rpmarch.rpm" 2>/dev/null) || listing=
        for want in /usr/bin/fabricbench /usr/share/fabricbench/profiles/tcp-loopback.toml /usr/share/doc/fabricbench/ACCEPTANCE.md \
            "${KIT[@]/#//usr/share/fabricbench/}"; do
            grep -qx "$want" <<<"$listing" || fail "fabricbench-$version-1.$rpmarch.rpm installs no $want"
        done
    done
    dpkg-deb -f "$dist/fabricbench_${version}-1_arm64.deb" Architecture | grep -qx arm64 || fail "the arm64 .deb is not arm64"
    (cd "$dist" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not match dist/"
}

check_dist() {
    local dist=$1 version=$2 arch bin
    for arch in x86_64 aarch64; do
        bin=$dist/fabricbench-$version-$arch-linux-gnu
        [ -x "$bin" ] || fail "$bin is missing: run scripts/dist"
        check_linkage "$bin"
    done
    check_packages "$dist" "$version"
    for arch in x86_64 aarch64; do
        echo "dist --check: running the $arch binary (3 -> 1 fan-in on local ranks)" >&2
        check_runs "$(realpath "$dist/fabricbench-$version-$arch-linux-gnu")" "$version"
    done
    check_deb_install "$dist/fabricbench_${version}-1_amd64.deb"
    echo "dist --check: every check passed" >&2
}
