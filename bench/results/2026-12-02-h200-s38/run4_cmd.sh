#!/usr/bin/env bash
# Session 38, run 4 (the session's last ~150 s of device time; carry .deps): does the
# select become resident sooner, and the call end sooner, when every sampled-tail scan
# CTA lets it launch at its start (STRATA_IDX_EARLY=1) instead of at its loop's end?
# The select kernel (512 x 64 registers) fits beside the scan's CTAs where they hold
# few registers: 2 an SM (128K - 512K), or FP8's. A/B in one build, then --check.
set -u
DL=${DL:-150}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL CTX BATCH FMT
	timeout 40 build-gpu/strata bench indexer --ctx "$2" --batch "$3" --rows 1 --fmt "$4" --q8 --wgmma --reps 10 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	for e in 1 0; do
		[ $SECONDS -gt $((DL - 25)) ] && break 2
		STRATA_IDX_EARLY=$e pts "early$e r$r" 1M,256K,128K 1 fp8,mxfp4
	done
done | tee "$OUT/ab.txt"
[ $SECONDS -lt $((DL - 15)) ] && STRATA_IDX_EARLY=1 timeout $((DL - SECONDS)) build-gpu/strata bench indexer --check \
	--ctx 256K,1M --batch 1 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma --reps 5 >"$OUT/check.txt" 2>&1
grep -E "^(fp8|mxfp4) " "$OUT/check.txt" 2>/dev/null | awk '{print $1, $3, $9, $(NF-3)}'
