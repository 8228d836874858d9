#!/usr/bin/env bash
# s44 run 1: (a) the sampled tcase on head's kernels (s43 landed its new cases but ran
# them only on run 3's reverted kernels); (b) s43's staged-two-rows-4ctas.patch (two FP8
# rows staged, launch bound 4, one filing pass): head against the patched binary's filter
# path and its staged filing, alternated, two rounds; one-row points on both binaries;
# the sampled tcase and --check on the patched binary.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
build() {
	cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
		-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
	cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
		{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
}
tcase() { # NAME TAG
	local s=$SECONDS
	CK_RUN_CASE=$1 timeout 150 build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$1_$2.txt" 2>&1
	echo "tcase $1 ($2) rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$1_$2.txt")" | tee -a "$OUT/tcases_summary.txt"
	grep -iE "fail|error" "$OUT/tcase_$1_$2.txt" | head -5
}
build
echo "head built in $SECONDS s"
cp build-gpu/strata /tmp/strata-head
tcase sampled head
git apply --include='kernels/*' bench/results/2026-12-03-h200-s43/staged-two-rows-4ctas.patch || { echo "patch failed"; exit 1; }
s=$SECONDS; build; echo "patched built in $((SECONDS - s)) s"
pts() { # LABEL BIN ENV CTX BATCH ROWS
	env $3 timeout 40 $2 bench indexer --ctx $4 --batch $5 --rows $6 \
		--fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "head    r$r" /tmp/strata-head "" 512K,128K 8,32 2
	pts "filter  r$r" build-gpu/strata STRATA_IDX_SAMP_STAGED=0 512K,128K 8,32 2
	pts "staged  r$r" build-gpu/strata STRATA_IDX_SAMP_STAGED=1 512K,128K 8,32 2
done | tee "$OUT/ab2.txt"
echo "ab2 done at $SECONDS s"
{
	pts "head    1row" /tmp/strata-head "" 512K,128K 8,32 1
	pts "patched 1row" build-gpu/strata "" 512K,128K 8,32 1
	pts "head    b1" /tmp/strata-head "" 1M,128K 1 1
	pts "patched b1" build-gpu/strata "" 1M,128K 1 1
} | tee "$OUT/ab1.txt"
echo "ab1 done at $SECONDS s"
tcase sampled patched
s=$SECONDS
timeout 45 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $3, $4, $(NF-3)}' | tr '\n' ' ')"
grep "# check" "$OUT/check.txt"
echo "done at $SECONDS s"
