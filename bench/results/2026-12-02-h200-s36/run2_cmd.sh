#!/usr/bin/env bash
# Session 36, run 2: the tree (select-k512.patch + at most 4 sampled-tail scan CTAs an
# SM by default) against main (HEAD 729c643, build-alt/main) and against the tree's own
# knob at 0 (as many as fit: 6 with FP8) and 5, at 1M / 512K / 256K batch 1 (the rows the
# sampled tail takes); 128K / 512K batch 8 (paths unchanged); traces; --check; the
# sampled tcase. Carry .deps and build-alt (build-alt/main: `git archive HEAD`).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
CM="-DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release"
(cmake -S build-alt/main -B build-alt/bmain $CM >/dev/null 2>&1 &&
	cmake --build build-alt/bmain -j6 --target strata_cli >"$OUT/build_main.log" 2>&1) &
cmake -S . -B build-gpu $CM >/dev/null 2>&1 &&
	cmake --build build-gpu -j10 --target strata_cli kernels_gpu_indexer >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
wait
[ -x build-alt/bmain/strata ] || { tail -30 "$OUT/build_main.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
pts() { # LABEL CTX BATCH ROWS FMT [BINARY]
	timeout 100 ${6:-$B} bench indexer --ctx "$2" --batch "$3" --rows "$4" --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for i in 1 2 3; do
	pts "main r$i" 256K,512K,1M 1 1 fp8,mxfp4 build-alt/bmain/strata
	pts "tree r$i" 256K,512K,1M 1 1 fp8,mxfp4
	STRATA_IDX_SAMP_PER_SM=0 pts "fit r$i" 256K,512K,1M 1 1 fp8
	STRATA_IDX_SAMP_PER_SM=5 pts "ps5 r$i" 256K,512K,1M 1 1 fp8
done | tee "$OUT/ab.txt"
for i in 1 2; do
	pts "main r$i" 128K,512K 8 1 fp8 build-alt/bmain/strata
	pts "tree r$i" 128K,512K 8 1 fp8
done | tee -a "$OUT/ab.txt"
for f in fp8 mxfp4; do
	STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 \
		--wgmma --reps 4 >>"$OUT/traces.txt" 2>&1
done
STRATA_IDX_SAMP_PER_SM=0 STRATA_IDX_TRACE=1 timeout 30 $B bench indexer --ctx 1M --batch 1 --rows 1 \
	--fmt fp8 --q8 --wgmma --reps 4 >>"$OUT/traces.txt" 2>&1
grep -E "^(fp8|mxfp4) |idx-cta: [0-9]+ CTAs" "$OUT/traces.txt"
timeout 100 $B bench indexer --check --ctx 128K,256K,512K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print "check", $1, $3, $4, $5, $(NF-3)}' | tr '\n' ';'; echo
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_sampled.txt" 2>&1
echo "tcase sampled rc=$?"; tail -2 "$OUT/tcase_sampled.txt"
