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

need_leaf() {   # need_leaf leafJ (or rail leaf rKlJ), or die
    local leaf=$1 k r
    k=$(bed_leaves); r=$(bed_rails)
    if [[ $leaf =~ ^r([1-9])l([1-9][0-9]*)$ ]]; then
        ((BASH_REMATCH[1] <= r && BASH_REMATCH[2] <= (k ? k : 1))) \
            || die "no rail leaf '$leaf' in the running bed (rails: $r, leaves per rail: $((k ? k : 1)))"
        return 0
    fi
    ((k > 0)) || die "the running bed has no leaves (bring it up with: $0 up N --leaves K)"
    { [[ $leaf =~ ^leaf([1-9][0-9]*)$ ]] && ((BASH_REMATCH[1] <= k)); } \
        || die "no leaf '$leaf' in the running bed (leaf1..leaf$k)"
}

# shape_uplink leafJ RATE[/DIR]: tbf on the uplink's ends.  DIR: up (what
# the leaf sends to the spine: up-leafJ's egress), down (what the spine
# sends to the leaf: dn-leafJ's egress) or both (default).  Shaped one way,
# the port's packets under 128 bytes (the ACKs of the flows whose data goes
# the other way) pass beside the tbf instead of queueing behind the slow
# way's data: a port slow one way (a bad optic) does not hold up the
# traffic going the other way.  This kernel has htb, tbf and u32 but no
# fq or prio qdisc, hence an htb with two classes and the tbf under one.
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
        shape_port "up-$leaf" "$dir" "${args[@]}"
    fi
    if [[ $dir == down || $dir == both ]]; then
        shape_port "dn-$leaf" "$dir" "${args[@]}"
    fi
}

shape_port() {  # shape_port DEV DIR TBF-ARGS...: tbf, with small packets beside it one way only
    local dev=$1 dir=$2 tc=(tc -n "$SW_NS")
    shift 2
    if [[ $dir == both ]]; then
        "${tc[@]}" qdisc replace dev "$dev" root handle 1: tbf "$@" || die "tc tbf on $dev failed"
        return
    fi
    { "${tc[@]}" qdisc replace dev "$dev" root handle 1: htb default 20 \
        && "${tc[@]}" class add dev "$dev" parent 1: classid 1:10 htb rate 10gbit \
        && "${tc[@]}" class add dev "$dev" parent 1: classid 1:20 htb rate 10gbit \
        && "${tc[@]}" qdisc add dev "$dev" parent 1:20 handle 20: tbf "$@" \
        && "${tc[@]}" filter add dev "$dev" parent 1: protocol ip prio 1 u32 match u16 0 0xff80 at 2 flowid 1:10; } \
        || die "tc htb, tbf and u32 on $dev failed"
}

unshape_uplink() {  # unshape_uplink leafJ: its shaping and its loss go
    need_leaf "$1"
    local port
    for port in "up-$1" "dn-$1"; do
        tc -n "$SW_NS" qdisc del dev "$port" root 2>/dev/null || true
        ip netns exec "$SW_NS" nft delete table netdev "$(loss_table "$port")" 2>/dev/null || true
    done
}

# lossy_uplink leafJ PCT: PCT % of what enters either end of the uplink
# dropped at random (both ways, as a bad optic or cable would), by the
# ingress hook of each port's netdev table (this kernel has no netem).
lossy_uplink() {
    (($# == 2)) || die "usage: $0 lossy-uplink LEAF PCT, e.g. leaf1 5"
    local leaf=$1 pct=${2%\%} port
    need_leaf "$leaf"
    [[ $pct =~ ^[1-9][0-9]?$ ]] || die "bad loss '$2' for $leaf's uplink (a whole percent, 1 to 99)"
    for port in "up-$leaf" "dn-$leaf"; do
        ip netns exec "$SW_NS" nft delete table netdev "$(loss_table "$port")" 2>/dev/null || true
        ip netns exec "$SW_NS" nft -f - <<EOF || die "nft drop rule on $leaf's uplink port $port failed"
table netdev $(loss_table "$port") {
    chain in { type filter hook ingress device "$port" priority 0; numgen random mod 100 < $pct drop; }
}
EOF
    done
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

port_master() {  # the bridge a port of the switch namespace is on, or nothing
    ip -n "$SW_NS" -j link show dev "$1" 2>/dev/null | jq -r '.[0].master // empty'
}

port_state() {   # a port's operstate in the switch namespace, or nothing
    ip -n "$SW_NS" -j link show dev "$1" 2>/dev/null | jq -r '.[0].operstate // empty'
}

# selftest_fabric K RATE (the selftest's 4 hosts on K leaves): each host's
# port on its leaf bridge, each leaf's uplink up between its leaf and the
# spine, and leaf1's uplink shaped to RATE Mbit/s (up) carrying h1 -> h4
# (the last leaf) at that rate.  The rate is tbf's own byte counter over a
# 4 s window after 2 s of warm-up, two TCP streams keeping its queue full,
# within 5 % as the incast is held (tbf passes exactly its rate while
# backlogged; the margin is the window's edges and scheduling).
selftest_fabric() {
    local k=$1 rate=$2 fail=0 i j leaf on
    echo "== leaves: 4 hosts on $k leaves under spine $BRIDGE"
    for ((i = 1; i <= 4; i++)); do
        leaf=leaf$(leaf_of "$i" 4 "$k")
        on=$(port_master "h$i")
        echo "   h$i on ${on:-nothing} (expected $leaf)"
        [[ $on == "$leaf" ]] || { note "FAIL: h$i is on '${on:-nothing}', expected $leaf"; fail=1; }
    done
    for ((j = 1; j <= k; j++)); do
        on="$(port_master "up-leaf$j")/$(port_state "up-leaf$j") $(port_master "dn-leaf$j")/$(port_state "dn-leaf$j")"
        echo "   leaf$j uplink: up-leaf$j, dn-leaf$j on (bridge/state): $on"
        [[ $on == "leaf$j/UP $BRIDGE/UP" ]] \
            || { note "FAIL: leaf$j's uplink is '$on', expected leaf$j/UP $BRIDGE/UP"; fail=1; }
    done

    echo "== shaped uplink: leaf1 up at ${rate}mbit, h1 -> h4 (leaf$k), iperf3 -P 2, 7 s"
    shape_uplink leaf1 "${rate}mbit/up"
    local dir=$STATE/run/selftest b0 b1 t0 t1 wire deadline
    mkdir -p "$dir"
    "$0" exec h4 iperf3 -s -1 -p 5201 >"$dir/uplink-server.log" 2>&1 &
    deadline=$(( $(now_ms) + 5000 ))
    until "$0" exec h4 ss -Hltn 2>/dev/null | grep -q ':5201 '; do
        (( $(now_ms) < deadline )) || die "iperf3 server did not start in h4"
        sleep 0.05
    done
    "$0" exec h1 iperf3 -c "$NET.4" -p 5201 -P 2 -t 7 -J >"$dir/uplink-client.json" 2>&1 &
    local client=$!
    sleep 2
    b0=$(tbf_bytes up-leaf1); t0=$(now_ms)
    sleep 4
    b1=$(tbf_bytes up-leaf1); t1=$(now_ms)
    wait "$client" || true
    wire=$(awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", b * 8 / t / 1000 }')
    echo "   L2 rate through leaf1's uplink (tbf byte counter, 4 s window): $wire Mbit/s (tbf rate $rate)"
    awk -v w="$wire" -v r="$rate" 'BEGIN { exit !(w >= r * 0.95 && w <= r * 1.05) }' \
        || { note "FAIL: uplink rate $wire not within 5 % of $rate"; fail=1; }
    return "$fail"
}
