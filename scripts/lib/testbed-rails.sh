# shellcheck shell=bash
# The test bed's rails (sourced by scripts/testbed, whose variables and
# helpers it uses).  With `up N --rails R` every host gets R data NICs
# beside its eth0, as a GPU node has one NIC per rail: ethK (K = 1..R) with
# address $NET_RAIL.K.I/24 (10.199.1K.I), its switch port hIrK on rail K's
# leaf.  Rail K has one leaf per leaf of --leaves (rKl1..rKlJ; one, rKl1,
# without --leaves), filled with hosts as the leaves are, and every rail
# leaf joins one rail spine ($RAIL_SPINE) by a veth uplink (up-rKlJ, its
# leaf end; dn-rKlJ, its spine end) that shape-uplink narrows.  eth0 stays
# on its own bridge: ssh and the coordinator never cross a rail.
#
# A fabricbench topology that says the same, for 4 hosts on 2 leaves:
#   [switch.r1l1] nics = "h[1-2]:eth1"    [switch.r1l2] nics = "h[3-4]:eth1"
#   [switch.r2l1] nics = "h[1-2]:eth2"    ...
#   [switch.rsp]  links = ["r1l1", "r1l2", "r2l1", "r2l2"]

readonly RAIL_SPINE=rsp      # the rails' spine bridge, inside $SW_NS
readonly MAX_RAILS=4

bed_rails() {   # rails of the running bed; 0 when it has none
    if [[ -s $STATE/run/rails ]]; then cat "$STATE/run/rails"; else echo 0; fi
}

# nic_ports hI[:ethK] -> "hI PORT DEV": the host, its NIC's switch port and
# the NIC inside it (eth0 when none is named), or die.
nic_ports() {
    local h=${1%%:*} nic=eth0 k
    [[ $1 == *:* ]] && nic=${1#*:}
    need_host "$h"
    [[ $nic == eth0 ]] && { echo "$h $h eth0"; return 0; }
    k=0
    [[ $nic =~ ^eth([1-9])$ ]] && k=${BASH_REMATCH[1]}
    if ((k == 0 || k > $(bed_rails))); then
        die "no NIC '$nic' on $h (eth0, or eth1..eth$(bed_rails) with --rails)"
    fi
    echo "$h ${h}r$k $nic"
}

need_rails() {  # need_rails R: a count of rails, or die
    { [[ $1 =~ ^[0-9]$ ]] && (($1 <= MAX_RAILS)); } || die "--rails must be 0..$MAX_RAILS (data NICs per host), got '$1'"
}

rail_addr() {   # rail_addr K I -> hI's address on rail K
    echo "10.199.$((10 + $1)).$2"
}

# `ip -batch` lines (in $SW_NS) for R rails of N hosts on J leaves each.
rails_links() {  # rails_links R J N MTU
    local r=$1 j=$2 n=$3 mtu=$4 k l i
    ((r)) || return 0
    echo "link add $RAIL_SPINE mtu $mtu type bridge"
    echo "link set $RAIL_SPINE up"
    for ((k = 1; k <= r; k++)); do
        for ((l = 1; l <= j; l++)); do
            echo "link add r${k}l$l mtu $mtu type bridge"
            echo "link set r${k}l$l up"
            echo "link add up-r${k}l$l mtu $mtu type veth peer name dn-r${k}l$l mtu $mtu"
            echo "link set up-r${k}l$l master r${k}l$l up"
            echo "link set dn-r${k}l$l master $RAIL_SPINE up"
        done
        for ((i = 1; i <= n; i++)); do
            echo "link add h${i}r$k mtu $mtu type veth peer name eth$k mtu $mtu netns h$i"
            echo "link set h${i}r$k master r${k}l$(leaf_of "$i" "$n" "$j") up"
        done
    done
}

# `ip -batch` lines (in hI) that bring up hI's rail NICs.
rails_addrs() {  # rails_addrs R I
    local r=$1 i=$2 k
    for ((k = 1; k <= r; k++)); do
        printf 'link set eth%d address 02:fb:%02x:00:00:%02x up\naddr add %s/24 dev eth%d\n' \
            "$k" "$k" "$i" "$(rail_addr "$k" "$i")" "$k"
    done
}

# Each host answers ARP for an address only on the NIC that holds it
# (arp_ignore=1) and asks from that NIC's address (arp_announce=2): the
# rails share one spine, and a host answering for its eth2 on its eth1
# would draw rail 2's traffic onto rail 1.
rails_arp() {    # rails_arp I
    ip netns exec "h$1" sh -c 'echo 1 >/proc/sys/net/ipv4/conf/all/arp_ignore &&
        echo 2 >/proc/sys/net/ipv4/conf/all/arp_announce' || die "h$1: setting arp_ignore failed"
}

nic_shaping() {  # nic_shaping hI K -> "(in RATE out RATE)" where ethK is shaped
    local q_in q_out
    q_in=$(tbf_rate "$1r$2")
    q_out=$(tc -n "$1" qdisc show dev "eth$2" 2>/dev/null | awk '/tbf/ {for (k=1;k<=NF;k++) if ($k=="rate") print $(k+1)}')
    [[ -n $q_in$q_out ]] && echo "(${q_in:+in $q_in}${q_in:+${q_out:+ }}${q_out:+out $q_out})"
    return 0
}

rails_status() {
    local r j k l i n hosts up down shaped
    r=$(bed_rails)
    ((r > 0)) || return 0
    j=$(bed_leaves); ((j)) || j=1
    n=$(wc -l <"$STATE/run/hosts")
    echo "  rails: $r, each on $j leaf (leaves) under spine $RAIL_SPINE; hI's ethK is 10.199.1K.I"
    printf '  %-7s %-40s %s\n' LEAF NICS UPLINK
    for ((k = 1; k <= r; k++)); do
        for ((l = 1; l <= j; l++)); do
            hosts=""
            for ((i = 1; i <= n; i++)); do
                (($(leaf_of "$i" "$n" "$j") == l)) && hosts+="h$i:eth$k$(nic_shaping "h$i" "$k") "
            done
            up=$(tbf_rate "up-r${k}l$l"); down=$(tbf_rate "dn-r${k}l$l")
            shaped="${up:+up $up }${down:+down $down}"; shaped=${shaped% }
            printf '  %-7s %-40s %s\n' "r${k}l$l" "${hosts% }" "${shaped:--}"
        done
    done
}
