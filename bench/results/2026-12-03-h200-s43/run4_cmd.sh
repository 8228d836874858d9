#!/usr/bin/env bash
# s43 run 4: traces of run 3's two-row staged filing (staged-two-rows.patch's tree)
# against the filter path, 512K batch 8 and 128K batch 32, two FP8 rows: where it loses.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli >/tmp/build_new.log 2>&1 ||
	{ grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
trc() { # LABEL ENV CTX BATCH ROWS
	echo "== $1"
	env $2 STRATA_IDX_TRACE=1 timeout 40 build-gpu/strata bench indexer \
		--ctx $3 --batch $4 --rows $5 --fmt fp8 --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -8 | cut -c1-900
}
{
	trc "512K b8 2 rows staged" STRATA_IDX_SAMP_STAGED=1 512K 8 2
	trc "512K b8 2 rows filter" STRATA_IDX_SAMP_STAGED=0 512K 8 2
	trc "128K b32 2 rows staged" STRATA_IDX_SAMP_STAGED=1 128K 32 2
	trc "128K b32 2 rows filter" STRATA_IDX_SAMP_STAGED=0 128K 32 2
} >"$OUT/traces.txt" 2>&1
grep -E "^==|loop end|idx-trace" "$OUT/traces.txt" | cut -c1-700
echo "done at $SECONDS s"
