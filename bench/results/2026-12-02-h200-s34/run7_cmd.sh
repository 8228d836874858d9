#!/usr/bin/env bash
# Prepared in session 34, not run (no device time left): with sampled-tail-hist.patch
# applied (git apply), the
# per-CTA timeline (idx-cta lines: each SM's CTAs, their start and loop end) of one
# 1M-key FP8 call and one MXFP4 call: is FP8's late sample a CTA that starts late or one
# that runs slowly, and on which SM? Carry .deps.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 ||
	{ tail -30 "$OUT/build.log"; exit 1; }
echo "built $(date +%T)"
for f in fp8 mxfp4; do
	STRATA_IDX_TRACE=1 timeout 30 build-gpu/strata bench indexer --ctx 1M --batch 1 --rows 1 \
		--fmt $f --q8 --wgmma --reps 4 >"$OUT/trace_$f.txt" 2>&1
	grep -E "idx-" "$OUT/trace_$f.txt" | tail -8
done
