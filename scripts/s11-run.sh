#!/usr/bin/env bash
# session 11: the indexer test, traces and an A/B against REV ($1), one device call.
set -u
rev=$1
OUT=$OUT CTEST_R="${CTEST_R:-kernels_gpu_indexer}" AB_ARGS="${AB_ARGS:-bench indexer --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma}" \
	scripts/gpu-ab.sh run "$rev" >"$OUT/ab.log" 2>&1
mv "$OUT/all.tgz" "$OUT/ab.tgz"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
for f in fp8 mxfp4; do
	STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 --wgmma --reps 8 >"$OUT/tr_$f.txt" 2>&1
done
