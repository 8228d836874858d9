#!/usr/bin/env bash
# Session 33 run 5: run 4's sampled tail with two more trace points (each scan CTA's sample
# written; the sampling CTA's second pass done): where the sampling CTA's time goes.
# Timelines only. Carry .deps.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
B=build-gpu/strata
for c in "1M 1 fp8" "1M 1 mxfp4" "128K 8 fp8" "32K 8 fp8"; do
	set -- $c
	STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx $1 --batch $2 --rows 1 --fmt $3 --q8 \
		--wgmma --reps 8 2>&1 | grep -E "idx-trace|sm " | tail -12 | sed "s/^/$1 b$2 $3 /"
done | tee "$OUT/traces.txt"
echo "traces done $(date +%T)"
