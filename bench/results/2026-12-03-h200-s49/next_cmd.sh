#!/usr/bin/env bash
# For the next session (not run in s49): where the filter path's ~12 us after the scan
# goes at two FP8 rows 128K batch 32 (the point ~1 us short of 0.7). Traced (s49 run 3),
# a filter CTA's first round is classed 1.1 - 2.6 us after its cut and its writes end
# 1.4 - 2.5 us after its list places return, phases with little work: are the scores'
# reads L2 hits or DRAM (s46's evict-last store changed nothing), and where do its warps
# stall? Application replay with no cache control, so that each pass sees the caches the
# scan left: (1) DRAM and L2 bytes of filter_kernel and of the scan before it; (2) the
# filter's stall reasons by SASS line (kernel replay). ~4 - 6 min. Before them an A/B
# of the cluster filter's size at that point (no code change). Land nothing from it
# without --check and the cluster tcase at the shape that wins.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/b0.log 2>&1 || { grep -E "error" /tmp/b0.log | head; exit 1; }
echo "built in $SECONDS s"
B=build-gpu/strata
# first, no code change: the cluster filter at that point as clusters of 3 or 2 (two
# rounds a CTA; s45 measured 3 at +0.3 us against the filter kernel, before s49's
# plain remote atomics made the cluster filter 0.4 - 1.3 us faster), three rounds
pts() { # LABEL ENV CTX BATCH ROWS
	env $2 timeout 60 $B bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^fp8 " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for v in "tree:STRATA_IDX_FCL=8" "fcl3:STRATA_IDX_FCL=3" "fcl2:STRATA_IDX_FCL=2"; do
		pts "${v%%:*} r$r" "${v#*:}" 128K 32 2
		pts "${v%%:*} r$r" "${v#*:}" 512K 8,32 2
	done
done | tee "$OUT/fcl_ab.txt"
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_read_lookup_hit.sum,lts__t_sectors_op_read_lookup_miss.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,gpu__time_duration.sum
s=$SECONDS
timeout 200 ncu --clock-control none --cache-control none --replay-mode application \
	-k "regex:filter_kernel|scan_ss_kernel" --launch-skip 4 -c 2 --metrics "$M" --csv \
	$B bench indexer --ctx 128K --batch 32 --rows 2 --fmt fp8 \
	--q8 --wgmma --reps 2 >"$OUT/ncu_bytes.csv" 2>/tmp/ncu1.log
echo "ncu bytes rc=$? $((SECONDS - s)) s"; tail -3 /tmp/ncu1.log
grep -E "dram__bytes|lookup_hit|lookup_miss|time_duration" "$OUT/ncu_bytes.csv" | cut -c1-220 | head -24
s=$SECONDS
timeout 200 ncu --clock-control none -k "regex:filter_kernel" --launch-skip 2 -c 1 \
	--metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
	--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis \
	--import-source no -f -o /tmp/p_filt $B bench indexer --ctx 128K --batch 32 --rows 2 --fmt fp8 \
	--q8 --wgmma --reps 2 >/tmp/ncu2.log 2>&1
echo "ncu stalls rc=$? $((SECONDS - s)) s"; tail -3 /tmp/ncu2.log
if [ -f /tmp/p_filt.ncu-rep ]; then
	ncu -i /tmp/p_filt.ncu-rep --page details >"$OUT/ncu_filt_details.txt" 2>&1
	ncu -i /tmp/p_filt.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >"$OUT/ncu_filt_sass.csv.gz"
fi
STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 128K --batch 32 --rows 2 --fmt fp8 --q8 --wgmma \
	--reps 3 2>&1 | grep idx- | tail -8 >"$OUT/traces.txt"
echo "done at $SECONDS s"
