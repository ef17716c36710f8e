#!/usr/bin/env bash
# The encode path against its copy+CRC-32C floor in instructions (callgrind), not wall-clock:
# one measured round of N records through the real Producer, and the same records through the
# floor (copy every value once, CRC-32C over them). Prints instructions per value byte for
# both and the floor's share. Usage: scripts/encode-callgrind.sh [value sizes...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p kprod-core --bench encode --no-run 2>&1 | tail -n 1
bin=$(ls -t target/release/deps/encode-* | grep -v '\.d$' | head -n 1)
n=${KPROD_BENCH_RECORDS:-20000}
out=$(mktemp -d)
ir() { # side toggles...
    local side=$1; shift
    KPROD_BENCH_CALLGRIND=$side KPROD_BENCH_VALUE=$size KPROD_BENCH_RECORDS=$n \
        valgrind --tool=callgrind --collect-atstart=no "$@" \
        --callgrind-out-file="$out/$side.$size" "$bin" >/dev/null 2>"$out/$side.$size.log"
    grep -o 'Collected : [0-9]*' "$out/$side.$size.log" | grep -o '[0-9]*$'
}
printf '%8s %16s %16s %10s %10s %8s\n' value kprod_Ir floor_Ir kprod_Ir/B floor_Ir/B floor%
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100 1024)
for size in "${sizes[@]}"; do
    k=$(ir kprod --toggle-collect='*measured_kprod' --toggle-collect='*untimed' \
        --toggle-collect='*untimed_drop')
    f=$(ir floor --toggle-collect='*measured_floor')
    awk -v s="$size" -v k="$k" -v f="$f" -v n="$n" 'BEGIN {
        printf "%7sB %16d %16d %10.2f %10.2f %7.1f%%\n", s, k, f, k/(n*s), f/(n*s), 100*f/k }'
done
echo "callgrind files in $out"
