# shellcheck shell=bash
# The TCP latency benchmark of scripts/bench: fabricbench's ping-pong
# against plain blocking ping-pongs on the same loopback addresses.
# Sourced by scripts/bench with $fb, $seconds and $rounds set, and its
# start_server / stop_server.
# shellcheck disable=SC2154 # fb, seconds, rounds and server_pid are scripts/bench's

# One 64 B TCP ping-pong 127.0.0.1 -> 127.0.0.2, --rounds times in turn:
# fabricbench (`pair … send_lat --transport tcp`), sockperf ping-pong and
# qperf tcp_lat, half round trips in µs. Medians of the rounds; ratio =
# reference / fabricbench, so >= 1.0 means at least as quick. sockperf's
# median is set against fabricbench's (typical), qperf's mean against its mean.
bench_latency() {
    local round fb_p50='' fb_avg='' sp_p50='' qp_avg='' p50 avg sp qp
    echo "# latency: TCP ping-pong, 64 B, 127.0.0.1 -> 127.0.0.2, $seconds s each, $rounds rounds, $(nproc) cores"
    printf '%-6s %16s %16s %18s %16s\n' round "fabricbench p50" "fabricbench mean" "sockperf p50 (us)" "qperf mean (us)"
    for round in $(seq "$rounds"); do
        read -r p50 avg < <("$fb" pair localhost localhost send_lat --transport tcp -s 64 -D "$seconds" --no-save 2>/dev/null |
            awk '$1 == 64 { print $5, $6 }')
        start_server sockperf server --tcp -i 127.0.0.2 -p 15211
        sp=$(sockperf ping-pong --tcp -i 127.0.0.2 -p 15211 -m 64 -t "$seconds" 2>/dev/null |
            awk '/percentile 50.000/ { print $NF }')
        stop_server
        start_server qperf -lp 15212
        qp=$(qperf 127.0.0.2 -lp 15212 -m 64 -t "$seconds" tcp_lat 2>/dev/null |
            awk '/latency/ { v = $3; if ($4 == "ms") v *= 1000; if ($4 == "ns") v /= 1000; print v }')
        stop_server
        printf '%-6s %16s %16s %18s %16s\n' "$round" "${p50:-fail}" "${avg:-fail}" "${sp:-fail}" "${qp:-fail}"
        fb_p50="$fb_p50 ${p50:-0}" fb_avg="$fb_avg ${avg:-0}" sp_p50="$sp_p50 ${sp:-0}" qp_avg="$qp_avg ${qp:-0}"
    done
    python3 -c '
import statistics as st, sys
fb50, fbavg, sp, qp = (st.median(map(float, x.split())) for x in sys.argv[1:])
r = lambda ref, ours: ref / ours if ours else 0
print(f"medians of the rounds: fabricbench p50 {fb50:.2f} us, sockperf p50 {sp:.2f} us, ratio {r(sp, fb50):.2f}")
print(f"                       fabricbench mean {fbavg:.2f} us, qperf mean {qp:.2f} us, ratio {r(qp, fbavg):.2f}")
' "$fb_p50" "$fb_avg" "$sp_p50" "$qp_avg"
    echo "goal: ratios >= 1.0 (fabricbench's engine spins between messages, as perftest polls; the references sleep in recv)"
}
