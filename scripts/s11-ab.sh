#!/usr/bin/env bash
# session 11: A/B of the tree against REV (gpu-ab.sh run, no tests), then Nsight Compute
# of the select kernel (NCU_K) in the tree; logs to OUT/ab.tgz and OUT/all.tgz.
set -u
rev=$1
OUT=$OUT CTEST_R='^none$' AB_ARGS="${AB_ARGS:-bench indexer --ctx 1M --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma}" \
	scripts/gpu-ab.sh run "$rev" >"$OUT/ab.log" 2>&1
mv "$OUT/all.tgz" "$OUT/ab.tgz"
if [ -n "${NCU_K:-}" ]; then
	OUT=$OUT scripts/gpu-ab.sh ncu >"$OUT/ncu.log" 2>&1
fi
