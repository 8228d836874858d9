#!/usr/bin/env bash
# s43 run 5: run 4 found the two-row staged instance at 136 registers, three CTAs an SM
# (the filter path's scan runs four) and its two rows filed one after the other; here
# four CTAs an SM (launch bound 4: 124 registers, no spill) and both rows filed in one
# pass (samp_staged2_of). Filter against staged, one round; --check (the device time
# left allowed no more).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 ||
	{ grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL ENV CTX BATCH ROWS
	env $2 timeout 30 build-gpu/strata bench indexer --ctx $3 --batch $4 --rows $5 \
		--fmt fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, $5, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1; do
	pts "filter r$r" STRATA_IDX_SAMP_STAGED=0 512K,128K 8,32 2
	pts "staged r$r" STRATA_IDX_SAMP_STAGED=1 512K,128K 8,32 2
done | tee "$OUT/ab2.txt"
echo "ab2 done at $SECONDS s"
s=$SECONDS
timeout 30 build-gpu/strata bench indexer --check --ctx 512K,128K --batch 8,32 --rows 2 --fmt fp8 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $3, $4, $(NF-3)}' | tr '\n' ' ')"
echo "done at $SECONDS s"
