#!/usr/bin/env bash
# For the next session (not run in s48): two-parts.patch (two FP8 rows a CTA, every CTA
# two ranges where the slots are not a multiple of the requests: 128K batch 32) and
# rs-one5.patch (the MXFP4 one-row batch loop at five CTAs an SM) in one build beside the
# tree; the FP8 points also with STRATA_IDX_TWOPART=0 in the patched binary; three
# rounds; cluster-red.patch (the cluster filter's bin-2 counts by plain remote atomics)
# in a second copy, on the points the cluster filter serves; then the ranges / waves /
# gpu / cluster tcases and --check, and the traced CTA ends of 128K batch 32 two rows
# (each SM's tiles should read ~124, not 96 / 128).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
P=$PWD/bench/results/2026-12-03-h200-s48
rm -rf /tmp/alt && mkdir -p /tmp/alt &&
	cp -r CMakeLists.txt README.md base bench cachemgr cmake engine kernels prefetch scripts tests tiers /tmp/alt/ &&
	(cd /tmp/alt && git apply "$P/two-parts.patch" "$P/rs-one5.patch") || { echo "patch failed"; exit 1; }
rm -rf /tmp/alt2 && mkdir -p /tmp/alt2 &&
	cp -r CMakeLists.txt README.md base bench cachemgr cmake engine kernels prefetch scripts tests tiers /tmp/alt2/ &&
	(cd /tmp/alt2 && git apply "$P/cluster-red.patch") || { echo "patch failed"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg /tmp/alt /tmp/b-alt && cfg /tmp/alt2 /tmp/b-alt2 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j5 --target strata_cli >/tmp/b0.log 2>&1 &
cmake --build /tmp/b-alt2 -j5 --target strata_cli kernels_gpu_indexer >/tmp/b2.log 2>&1 &
cmake --build /tmp/b-alt -j6 --target strata_cli kernels_gpu_indexer >/tmp/b1.log 2>&1 ||
	{ grep -E "error" /tmp/b1.log | head; exit 1; }
wait
[ -x build-gpu/strata ] && [ -x /tmp/b-alt2/strata ] || { grep -E "error" /tmp/b0.log /tmp/b2.log | head; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV BIN CTX BATCH ROWS FMT
	env $2 timeout 60 "$3" bench indexer --ctx "$4" --batch "$5" --rows "$6" --fmt $7 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for v in "tree::build-gpu" "tp:STRATA_IDX_TWOPART=1:/tmp/b-alt" "tp0:STRATA_IDX_TWOPART=0:/tmp/b-alt"; do
		IFS=: read -r l e b <<<"$v"
		pts "$l r$r" "$e" "$b/strata" 128K 32,64 2 fp8
		pts "$l r$r" "$e" "$b/strata" 512K 32 2 fp8
	done
	for v in "tree:build-gpu" "rs5:/tmp/b-alt"; do
		pts "${v%%:*} r$r" "" "${v#*:}/strata" 128K 8,32,64 1 mxfp4
		pts "${v%%:*} r$r" "" "${v#*:}/strata" 512K,1M 8 1 mxfp4
	done
	for v in "tree:build-gpu" "cr:/tmp/b-alt2"; do
		pts "${v%%:*} r$r" "" "${v#*:}/strata" 128K 8,64 2 fp8
		pts "${v%%:*} r$r" "" "${v#*:}/strata" 512K 8 2 fp8
		pts "${v%%:*} r$r" "" "${v#*:}/strata" 128K 32 1 mxfp4
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 90 /tmp/b-alt/strata bench indexer --check --ctx 512K,128K --batch 8,32,64 --rows 1,2 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
timeout 60 /tmp/b-alt/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 1 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_mx.txt" 2>&1
echo "check mx rc=$? $(grep -E '^mxfp4 ' "$OUT/check_mx.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
CK_RUN_CASE=cluster timeout 120 /tmp/b-alt2/tests/kernels_gpu_indexer >"$OUT/tcase_cluster_cr.txt" 2>&1
echo "tcase cluster (cr) rc=$?: $(tail -1 "$OUT/tcase_cluster_cr.txt")"
for t in ranges waves gpu; do
	s=$SECONDS
	CK_RUN_CASE=$t timeout 150 /tmp/b-alt/tests/kernels_gpu_indexer >"$OUT/tcase_$t.txt" 2>&1
	echo "tcase $t rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$t.txt")"
	grep -iE "fail|error" "$OUT/tcase_$t.txt" | head -3
done
for e in STRATA_IDX_TWOPART=1 STRATA_IDX_TWOPART=0; do
	echo "== $e"
	env $e STRATA_IDX_TRACE=1 timeout 60 /tmp/b-alt/strata bench indexer --ctx 128K --batch 32 --rows 2 \
		--fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep idx- | tail -8
done >"$OUT/traces.txt"
echo "done at $SECONDS s"
