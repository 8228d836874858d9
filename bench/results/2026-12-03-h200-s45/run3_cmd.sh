#!/usr/bin/env bash
# s45 run 3: the landed rule (a smaller cluster only where it walks no more rounds):
# every indexer tcase, --check (both formats), and default against FCL=0 (filter_kernel),
# one binary, alternated, at the points the rule decides.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS [FMT]
	env $2 timeout 40 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt ${6:-fp8} --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
tcase() { # NAME TAG ENV TIMEOUT
	local s=$SECONDS
	env $3 CK_RUN_CASE=$1 timeout ${4:-150} build-gpu/tests/kernels_gpu_indexer >"$OUT/tcase_$1.txt" 2>&1
	echo "tcase $1 ($2) rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tcase_$1.txt")" | tee -a "$OUT/tcases_summary.txt"
	grep -iE "fail|error" "$OUT/tcase_$1.txt" | head -3
}
tcase cluster def "" 240
tcase gpu def ""
for f in fp8 mxfp4; do
	timeout 90 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32,64 --rows 2,1 \
		--fmt $f --q8 --wgmma >"$OUT/check_$f.txt" 2>&1
	echo "check $f rc=$? $(grep -E '^(fp8|mxfp4) ' "$OUT/check_$f.txt" | awk '{print $3, $4, $5, $(NF-3)}' | tr '\n' ' ')"
	grep "# check" "$OUT/check_$f.txt"
done
for r in 1 2; do
	pts "def r$r" "" 128K 8,32,64 2
	pts "fcl0 r$r" STRATA_IDX_FCL=0 128K 8,32,64 2
	pts "def r$r" "" 512K 8 2
	pts "fcl0 r$r" STRATA_IDX_FCL=0 512K 8 2
	pts "def r$r" "" 128K 32 1 mxfp4
	pts "fcl0 r$r" STRATA_IDX_FCL=0 128K 32 1 mxfp4
	pts "def r$r" "" 512K 8 1 mxfp4
	pts "fcl0 r$r" STRATA_IDX_FCL=0 512K 8 1 mxfp4
done | tee "$OUT/ab.txt"
echo "ab done at $SECONDS s"
tcase sampled def ""
tcase ranges def ""
tcase copies def ""
tcase waves def ""
echo "done at $SECONDS s"
