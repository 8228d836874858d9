#!/usr/bin/env bash
# Prepared in s41, not run (no device time left): splits the staged filing's slower scan
# loops (runs 1 - 3: +16 - 21 us at 1M batch 8) between the sample and the cooperative
# launch. Run it on a tree with staged-diag.patch applied (`git apply
# bench/results/2026-12-03-h200-s41/staged-diag.patch`; staged.patch plus
# STRATA_IDX_SAMP_DIAG). Timing only where DIAG is set (the bound is the previous call's,
# so the lists are not exact). Configurations, one binary, 2 rounds, 1M / 512K batch 8:
# old (the filter path), st (staged, 16 sampled tiles), d1 (staged, no sample,
# cooperative launch), d2 (staged, no sample, plain launch); then traces of each.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/build_new.log 2>&1 || { tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL STAGED DIAG
	STRATA_IDX_SAMP_STAGED=$2 STRATA_IDX_SAMP_DIAG=$3 timeout 90 build-gpu/strata \
		bench indexer --ctx 1M,512K --batch 8 --rows 1 --fmt mxfp4,fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "old r$r" 0 0
	pts "st  r$r" 1 0
	pts "d1  r$r" 1 1
	pts "d2  r$r" 1 2
done | tee "$OUT/ab.txt"
for cfg in "0 0" "1 0" "1 1" "1 2"; do
	set -- $cfg
	for f in mxfp4 fp8; do
		echo "== 1M batch 8 $f staged $1 diag $2"
		STRATA_IDX_SAMP_STAGED=$1 STRATA_IDX_SAMP_DIAG=$2 STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata \
			bench indexer --ctx 1M --batch 8 --rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 |
			grep -E "idx-" | tail -8 | cut -c1-700
	done
done >"$OUT/traces.txt" 2>&1
grep -E "^==|loop end" "$OUT/traces.txt"
echo "done at $SECONDS s"
