#!/usr/bin/env bash
# session 11's last GPU check: every gpu test and an A/B against REV ($1) at 1M batch
# 1 and 8 (gpu-ab.sh run), then the issue-3 points at batch 32, --check at batch 8, the
# default scan, and one-row timelines; logs under OUT (ab.tgz and *.txt).
set -u
rev=$1
OUT=$OUT CTEST_R= AB_ARGS="bench indexer --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma" \
	scripts/gpu-ab.sh run "$rev" >"$OUT/ab.log" 2>&1
mv "$OUT/all.tgz" "$OUT/ab.tgz"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
B=build-gpu/strata
timeout 100 $B bench indexer --ctx 1M --batch 32 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma >"$OUT/b32.txt" 2>&1
timeout 150 $B bench indexer --check --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?" >>"$OUT/check.txt"
timeout 60 $B bench indexer --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 >"$OUT/dflt.txt" 2>&1
for f in fp8 mxfp4; do
	STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 --wgmma --reps 8 >"$OUT/tr_$f.txt" 2>&1
done
