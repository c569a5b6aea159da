# shellcheck shell=bash
# The test bed as a two-level fabric (sourced by scripts/testbed, whose
# variables and helpers it uses).  With `up N --leaves K` the hosts sit on K
# leaf bridges leaf1..leafK instead of the one bridge, and each leaf joins
# the bridge $BRIDGE, now the spine, by one veth: its leaf end up-leafJ
# (what leaves the leaf for the spine) and its spine end dn-leafJ (what the
# spine sends down to the leaf).  All of it lives in $SW_NS, so `down`
# removes it with that namespace.  The root port and Slurm's controller stay
# on the spine.
#
# Hosts fill the leaves in order, in blocks as even as they can be: hI is on
# leaf floor((I-1)*K/N)+1, so 6 hosts on 3 leaves are h1,h2 | h3,h4 | h5,h6.
# A fabricbench topology file that says the same: [switch.leafJ] hosts = "h[A-B]"
# per leaf and [switch.spine1] links = ["leaf1", ..., "leafK"].

leaf_of() {     # leaf_of I N K -> the leaf number of host hI
    echo $(( ($1 - 1) * $3 / $2 + 1 ))
}

bed_leaves() {  # leaves of the running bed; 0 when it is one bridge
    if [[ -s $STATE/run/leaves ]]; then cat "$STATE/run/leaves"; else echo 0; fi
}

# `ip -batch` lines that make K leaf bridges and their uplinks to the spine.
fabric_links() {  # fabric_links K MTU
    local k=$1 mtu=$2 j
    for ((j = 1; j <= k; j++)); do
        echo "link add leaf$j mtu $mtu type bridge"
        echo "link set leaf$j up"
        echo "link add up-leaf$j mtu $mtu type veth peer name dn-leaf$j mtu $mtu"
        echo "link set up-leaf$j master leaf$j up"
        echo "link set dn-leaf$j master $BRIDGE up"
    done
}

need_leaf() {   # need_leaf leafJ, or die
    local leaf=$1 k
    k=$(bed_leaves)
    ((k > 0)) || die "the running bed has no leaves (bring it up with: $0 up N --leaves K)"
    { [[ $leaf =~ ^leaf([1-9][0-9]*)$ ]] && ((BASH_REMATCH[1] <= k)); } \
        || die "no leaf '$leaf' in the running bed (leaf1..leaf$k)"
}

# shape_uplink leafJ RATE[/DIR]: tbf on the uplink's ends.  DIR: up (what
# the leaf sends to the spine: up-leafJ's egress), down (what the spine
# sends to the leaf: dn-leafJ's egress) or both (default).
shape_uplink() {
    (($# == 2)) || die "usage: $0 shape-uplink LEAF RATE[/up|down|both], e.g. leaf1 250mbit"
    local leaf=$1 rate=$2 dir=both bits mtu args
    if [[ $rate == */* ]]; then dir=${rate#*/}; rate=${rate%%/*}; fi
    [[ $dir == up || $dir == down || $dir == both ]] || die "bad direction '$dir' for $leaf's uplink (up, down or both)"
    need_leaf "$leaf"
    bits=$(rate_bits "$rate") || die "bad rate '$rate' for $leaf's uplink (e.g. 250mbit, 1gbit; at least 8kbit)"
    mtu=$(cat "$STATE/run/mtu")
    read -r -a args <<<"$(shape_args "$bits" "$mtu")"
    unshape_uplink "$leaf"
    if [[ $dir == up || $dir == both ]]; then
        tc -n "$SW_NS" qdisc replace dev "up-$leaf" root tbf "${args[@]}" || die "tc tbf on up-$leaf failed"
    fi
    if [[ $dir == down || $dir == both ]]; then
        tc -n "$SW_NS" qdisc replace dev "dn-$leaf" root tbf "${args[@]}" || die "tc tbf on dn-$leaf failed"
    fi
}

unshape_uplink() {  # unshape_uplink leafJ
    need_leaf "$1"
    tc -n "$SW_NS" qdisc del dev "up-$1" root 2>/dev/null || true
    tc -n "$SW_NS" qdisc del dev "dn-$1" root 2>/dev/null || true
}

tbf_rate() {    # the tbf rate on a port of the switch namespace, or nothing
    tc -n "$SW_NS" qdisc show dev "$1" 2>/dev/null | awk '/tbf/ {for (k=1;k<=NF;k++) if ($k=="rate") print $(k+1)}'
}

fabric_status() {
    local k j n i hosts up down shaped
    k=$(bed_leaves)
    ((k > 0)) || return 0
    n=$(wc -l <"$STATE/run/hosts")
    echo "  leaves: $k under spine $BRIDGE"
    printf '  %-7s %-22s %s\n' LEAF HOSTS UPLINK
    for ((j = 1; j <= k; j++)); do
        hosts=""
        for ((i = 1; i <= n; i++)); do
            (($(leaf_of "$i" "$n" "$k") == j)) && hosts+="h$i "
        done
        up=$(tbf_rate "up-leaf$j"); down=$(tbf_rate "dn-leaf$j")
        shaped="${up:+up $up }${down:+down $down}"; shaped=${shaped% }
        printf '  %-7s %-22s %s\n' "leaf$j" "${hosts% }" "${shaped:--}"
    done
}
