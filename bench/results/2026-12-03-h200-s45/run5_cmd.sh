#!/usr/bin/env bash
# s45 run 5: traces of the landed tree where the cluster filter runs (two FP8 rows 512K
# batch 8: clusters of 8, two rounds; one MXFP4 row 128K batch 32: of 7) and where it
# does not (two FP8 rows 128K batch 32), for the next session; the GPU's room for
# clusters of 16.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/build.log 2>&1 ||
	{ grep -E "error" /tmp/build.log | head; tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
trc() { # LABEL ENV CTX BATCH ROWS FMT
	echo "== $1"
	env $2 STRATA_IDX_TRACE=1 timeout 40 build-gpu/strata bench indexer \
		--ctx $3 --batch $4 --rows $5 --fmt $6 --q8 --wgmma --reps 3 2>&1 |
		grep -E "idx-trace|idx-fcl" | tail -3 | cut -c1-900
}
{
	trc "512K b8 2 rows fp8 (cluster 8)" "" 512K 8 2 fp8
	trc "512K b8 2 rows fp8 (filter_kernel)" STRATA_IDX_FCL=0 512K 8 2 fp8
	trc "128K b32 1 row mxfp4 (cluster 7)" "" 128K 32 1 mxfp4
	trc "128K b32 2 rows fp8 (filter_kernel)" "" 128K 32 2 fp8
	trc "512K b8 2 rows fp8, FCL=16 all" "STRATA_IDX_FCL=16 STRATA_IDX_FCL_ALL=1" 512K 8 2 fp8
} 2>&1 | tee "$OUT/traces.txt" | cut -c1-700
echo "done at $SECONDS s"
