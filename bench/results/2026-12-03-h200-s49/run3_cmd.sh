#!/usr/bin/env bash
# s49 run 3: run 2's floor (hist_floor) with conflict-free 16-byte reads, inlined;
# STRATA_IDX_HFLOOR=1 (the floor), 2 (floors found, the flush whole: their cost alone)
# and 0 (whole), one binary, alternated three rounds; --check and the gpu / cluster
# tcases with the floor on; traces of 128K batch 32 two rows, floor on and off.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/b0.log 2>&1 ||
	{ grep -E "error" /tmp/b0.log | head; exit 1; }
echo "built in $SECONDS s"
B=build-gpu/strata
pts() { # LABEL ENV CTX BATCH ROWS FMT
	env $2 timeout 60 $B bench indexer --ctx "$3" --batch "$4" --rows "$5" --fmt $6 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for v in "hf:STRATA_IDX_HFLOOR=1" "find:STRATA_IDX_HFLOOR=2" "whole:STRATA_IDX_HFLOOR=0"; do
		l=${v%%:*} e=${v#*:}
		pts "$l r$r" "$e" 128K 8,32,64 2 fp8
		pts "$l r$r" "$e" 512K 8 2 fp8
		pts "$l r$r" "$e" 32K 8 1 fp8
		pts "$l r$r" "$e" 128K 32 1 mxfp4
		pts "$l r$r" "$e" 1M 8 1 mxfp4
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 120 $B bench indexer --check --ctx 512K,128K,32K --batch 8,32 --rows 1,2,4 \
	--fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $(grep -E '^fp8 ' "$OUT/check.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
timeout 120 $B bench indexer --check --ctx 512K,128K,32K --batch 8,32 --rows 1,2 \
	--fmt mxfp4 --q8 --wgmma >"$OUT/check_mx.txt" 2>&1
echo "check mx rc=$? $(grep -E '^mxfp4 ' "$OUT/check_mx.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
for t in gpu cluster; do
	s=$SECONDS
	CK_RUN_CASE=$t timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$t.txt" 2>&1
	echo "tcase $t rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$t.txt")"
	grep -iE "fail|error" "$OUT/tcase_$t.txt" | head -3
done
for e in STRATA_IDX_HFLOOR=1 STRATA_IDX_HFLOOR=0; do
	echo "== $e 128K b32 2 rows fp8"
	env $e STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 128K --batch 32 --rows 2 \
		--fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep idx- | tail -8
done >"$OUT/traces.txt"
echo "done at $SECONDS s"
