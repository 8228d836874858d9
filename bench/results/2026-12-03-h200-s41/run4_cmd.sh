#!/usr/bin/env bash
# s41 run 4: run 3's staged filing with one and four sampled tiles a CTA, traced (1M
# batch 8, both formats): is t1's loop as fast as the filter path's, and its tail?
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/build_new.log 2>&1 || { tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
for t in 1 4; do
	for f in mxfp4 fp8; do
		echo "== 1M batch 8 $f staged tiles $t"
		STRATA_IDX_SAMP_STAGED=1 STRATA_IDX_SAMP_TILES=$t STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer \
			--ctx 1M --batch 8 --rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -8 | cut -c1-700
	done
done >"$OUT/traces.txt" 2>&1
grep -E "^==|idx-trace|loop end" "$OUT/traces.txt" | cut -c1-400
echo "done at $SECONDS s"
