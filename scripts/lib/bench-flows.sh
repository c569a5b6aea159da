# shellcheck shell=bash
# The many-flows benchmarks of scripts/bench (streams, all-to-all,
# many-ends): how the data path holds up as flow ends multiply, on local
# ranks of this machine, as ratios within one run. Sourced by scripts/bench
# with $fb (the release binary), $work (a scratch folder) and $seconds set,
# and its start_server / stop_server.
# shellcheck disable=SC2154 # fb, work, seconds and server_pid are scripts/bench's

# A hostfile of N local ranks (127.0.0.1 … 127.0.0.N) -> its path.
local_ranks() {
    local n=$1 path="$work/local$1"
    seq 1 "$n" | sed 's/^/127.0.0./' >"$path"
    echo "$path"
}

# Runs a one-group scenario (its group lines on stdin) on a hostfile and
# prints "Gb/s state start_skew_us window_s data_threads control_threads"
# of its first phase (rank 0's threads, from run.json).
flows_case() { # hostfile seconds
    local hosts=$1 secs=$2
    {
        printf '[run]\nname = "bench-flows"\nduration = "%ss"\nwarmup = "1s"\ninterval = "1s"\n' "$secs"
        printf '[[group]]\nname = "g"\n'
        cat
    } >"$work/flows.toml"
    "$fb" run "$work/flows.toml" -H "$hosts" --no-save --quiet --export-json - 2>"$work/flows.err" |
        python3 -c '
import json, sys
run = json.load(sys.stdin)
if not run["phases"]:
    print(0, run["status"]["state"], 0, 0, 0, 0)
    sys.exit()
p = run["phases"][0]
cpu = (p.get("ranks") or [{}])[0].get("cpu") or {}
data, control = cpu.get("data", {}), cpu.get("control", {})
state = "degraded" if p.get("degraded") else run["status"]["state"]
print(p.get("aggregate_gbps") or 0, state, p.get("start_skew_us") or 0, p.get("window_s") or 0,
      data.get("threads", 0), control.get("threads", 0))' || echo "0 failed 0 0 0 0"
}

iperf2_gbps() { # streams
    start_server iperf -s -B 127.0.0.2 -p 15202
    iperf -c 127.0.0.2 -B 127.0.0.1 -p 15202 -P "$1" -l 128K -t "$seconds" -y C 2>/dev/null |
        python3 -c '
import sys
rows = [l.strip().split(",") for l in sys.stdin if l.count(",") >= 8]
# Some iperf2 versions add a sum row (id -1), others give the streams only;
# a stream row gives bits/s over that stream alone: sum bytes over the longest span.
streams = [r for r in rows if r[5] != "-1"]
span = max((float(r[6].split("-")[1]) for r in streams), default=0)
print(sum(int(r[7]) for r in streams) * 8 / span / 1e9 if span else 0)'
    stop_server
}

# 1 flow of 2 … 1 024 TCP streams between two local ranks, --rounds times
# in turn; each count's median against the 2-stream median of the same run,
# beside iperf2 -P N (medians too) and iperf3 -P 128. One run of each is
# too noisy on a shared loopback: the 2-stream reference alone moved
# 40-52 Gb/s between runs of the same build.
bench_streams() {
    local hosts="$work/hosts" counts="2 64 512 1024" n round
    local -A fbs ips states
    echo "# streams: 1 flow, $seconds s windows, 127.0.0.1 -> 127.0.0.2, 128 KiB writes, $(nproc) cores, $rounds rounds"
    # One unmeasured run first: the first after a build came out at about
    # 0.6x the next ones here, which would flatter every ratio to it.
    printf 'pattern = "explicit"\nflows = [[0, 1]]\nstreams = 2\n' | flows_case "$hosts" 1 >/dev/null
    printf '%-6s %-8s %10s %10s %13s %12s %11s\n' round streams "Gb/s" state "skew (us)" "window (s)" "iperf2 Gb/s"
    for round in $(seq "$rounds"); do
        for n in $counts; do
            read -r gbps state skew window _ _ < <(printf 'pattern = "explicit"\nflows = [[0, 1]]\nstreams = %s\nmessage_size = "128K"\n' "$n" |
                flows_case "$hosts" "$seconds")
            ip=$(iperf2_gbps "$n")
            fbs[$n]="${fbs[$n]:-} $gbps" ips[$n]="${ips[$n]:-} $ip" states[$n]="${states[$n]:-} $state"
            printf '%-6s %-8s %10.2f %10s %13.0f %12.2f %11.2f\n' "$round" "$n" "$gbps" "$state" "$skew" "$window" "$ip"
        done
    done
    echo "medians of $rounds rounds:"
    printf '%-8s %10s %9s %-16s %11s %8s\n' streams "Gb/s" "x 2-str" "states" "iperf2 Gb/s" ratio
    for n in $counts; do
        python3 -c '
import statistics as st, sys
n, fb, base, ip, states = sys.argv[1:]
g, b, i = (st.median(map(float, x.split())) for x in (fb, base, ip))
states = ",".join(sorted(set(states.split())))
print(f"{n:<8} {g:10.2f} {g / b if b else 0:9.2f} {states:<16} {i:11.2f} {g / i if i else 0:8.2f}")
' "$n" "${fbs[$n]}" "${fbs[2]}" "${ips[$n]}" "${states[$n]}"
    done
    read -r gbps _ < <(printf 'pattern = "explicit"\nflows = [[0, 1]]\nstreams = 128\nmessage_size = "128K"\n' | flows_case "$hosts" "$seconds")
    ip3=$(iperf3_gbps 128)
    python3 -c 'import sys; g, i = float(sys.argv[1]), float(sys.argv[2]); print(f"128 streams: fabricbench {g:.2f} Gb/s, iperf3 -P 128 {i:.2f} Gb/s, ratio {g / i if i else 0:.2f}")' "$gbps" "$ip3"
    echo "goal: 512 and 1024 streams >= 0.9x the 2-stream rate and never degraded; ratios to iperf >= 1.0"
}

# All-to-all on 32 local ranks against the same on 8, 2 s windows.
bench_all_to_all() {
    local group='pattern = "all-to-all"\nmessage_size = "64K"\n' eights='' thirty_twos=''
    echo "# all-to-all: local ranks, 2 s windows, 64 KiB writes, $(nproc) cores, 8 and 32 ranks alternating, $rounds rounds"
    printf '%-6s %7s %10s %10s %13s %12s %14s\n' ranks flows "Gb/s" state "skew (us)" "window (s)" "rank 0 data thr"
    for _ in $(seq "$rounds"); do
        for n in 8 32; do
            read -r gbps state skew window data _ < <(printf '%b' "$group" | flows_case "$(local_ranks "$n")" 2)
            if [ "$n" = 8 ]; then eights="$eights $gbps"; else thirty_twos="$thirty_twos $gbps"; fi
            printf '%-6s %7s %10.2f %10s %13.0f %12.2f %14s\n' "$n" $((n * (n - 1))) "$gbps" "$state" "$skew" "$window" "$data"
        done
    done
    python3 -c 'import statistics as s, sys; a, b = (s.median(map(float, x.split())) for x in sys.argv[1:]); print(f"32 ranks / 8 ranks aggregate, medians: {b:.2f} / {a:.2f} = {b / a if a else 0:.2f}")' "$eights" "$thirty_twos"
    echo "goal: 32 ranks complete, not degraded, aggregate >= 0.9x that of 8 ranks"
}

# Rank 0 sending to 64 local ranks with 64 streams each (4 096 flow ends on
# rank 0): its threads and its memory per flow end, against one end.
bench_many_ends() {
    local hosts
    hosts=$(local_ranks 65)
    echo "# many-ends: one-to-all from rank 0 to 64 local ranks x 64 streams, 16 KiB writes, $(nproc) cores"
    printf '%-10s %10s %10s %12s %12s %14s\n' "ends" "Gb/s" state "data thr" "tasks" "VmRSS (KiB)"
    local rss1=""
    for streams in 1 64; do
        printf 'pattern = "one-to-all"\nstreams = %s\nmessage_size = "16K"\n' "$streams" >"$work/group"
        flows_case "$hosts" "$seconds" <"$work/group" >"$work/result" &
        local runner=$! rank0="" tasks=0 rss=0
        for _ in $(seq 600); do
            rank0=$(pgrep -n -f "^$fb worker --rank 0\$" || true)
            [ -n "$rank0" ] && break
            sleep 0.05
        done
        # Midway through the window (launch, connect and warm-up first).
        sleep $((seconds / 2 + 3))
        if [ -n "$rank0" ] && [ -d "/proc/$rank0" ]; then
            tasks=$(find "/proc/$rank0/task" -mindepth 1 -maxdepth 1 | wc -l)
            rss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$rank0/status")
        fi
        wait "$runner"
        read -r gbps state _ _ data _ <"$work/result"
        [ -z "$rss1" ] && rss1=$rss
        printf '%-10s %10.2f %10s %12s %12s %14s\n' $((64 * streams)) "$gbps" "$state" "$data" "$tasks" "$rss"
    done
    python3 -c '
import sys
rss1, rss, cores = (float(x) for x in sys.argv[1:])
per_end = (rss - rss1) * 1024 / (4096 - 64)
print(f"memory per flow end: {per_end / 1024:.1f} KiB (16 KiB of it a message buffer where an end has its own); cores {cores:.0f}")' "$rss1" "$rss" "$(nproc)"
    echo "goal: rank 0's data threads <= cores; memory per flow end beyond its buffers <= 16 KiB"
}
