#!/usr/bin/env bash
# Session 32 run 4: the whole sweep on the kept kernels (45f3aff), a context per
# invocation: one CSV a context and one console file (the device tool brings back few
# files: s31's run 2 lost two).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >/tmp/build.log 2>&1 ||
	{ tail -30 /tmp/build.log; exit 1; }
echo "built $(date +%T)"
for c in 1M 512K 128K 32K; do
	echo "== $c"
	timeout 130 build-gpu/strata bench indexer --ctx "$c" --batch 1,8,32,64 --rows 1,2,4 \
		--fmt fp8,mxfp4 --q8 --wgmma --reps 10 --csv "$OUT/sweep_$c.csv" 2>&1
	echo "$c rc=$?"
done >"$OUT/sweep.txt"
grep -E "^(fp8|mxfp4) |rc=" "$OUT/sweep.txt" | awk '/rc=/ {print; next} {print $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, $17, $18}'
grep -ic "tensor map" "$OUT/sweep.txt"
echo "done $(date +%T)"
