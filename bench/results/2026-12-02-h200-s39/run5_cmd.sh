#!/usr/bin/env bash
# Session 39, run 5: the sampled tail's MXFP4 two-set loop with its head weights in
# shared memory (96 registers: five CTAs an SM fit) (new = the working tree), at the
# default cap (4 an SM at 1M, 2 up to 512K) and at 5 (STRATA_IDX_SAMP_PER_SM=5), against
# dfc35bb (base: build-alt/base-src; 118 registers, weights in registers), 3 rounds;
# --check and the indexer tcases (sampled, gpu, waves, ranges, copies) on new.
# Carry .deps and build-alt/base-src.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg build-alt/base-src build-alt/base || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j11 >/tmp/build_new.log 2>&1 &
cmake --build build-alt/base -j5 --target strata_cli >/tmp/build_base.log 2>&1 || { tail -20 /tmp/build_base.log; exit 1; }
wait $! || { tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
pts() { # LABEL BIN CTX BATCH FMT
	timeout 90 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	pts "new r$r" build-gpu/strata 1M,512K,256K,128K 1 mxfp4,fp8
	pts "new r$r" build-gpu/strata 128K 8 mxfp4
	STRATA_IDX_SAMP_PER_SM=5 pts "cap5 r$r" build-gpu/strata 1M,512K,256K,128K 1 mxfp4
	STRATA_IDX_SAMP_PER_SM=5 pts "cap5 r$r" build-gpu/strata 128K 8 mxfp4
	pts "base r$r" build-alt/base/strata 1M,512K,256K,128K 1 mxfp4,fp8
	pts "base r$r" build-alt/base/strata 128K 8 mxfp4
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
for P in "" 5; do
	STRATA_IDX_SAMP_PER_SM=$P timeout 60 build-gpu/strata bench indexer --check --ctx 128K,1M --batch 1,8 \
		--rows 1,2,4 --fmt fp8,mxfp4 --q8 --wgmma >/tmp/check.txt 2>&1
	echo "check cap ${P:-default} rc=$?: $(grep -E '^(fp8|mxfp4) ' /tmp/check.txt | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
	(echo "== cap ${P:-default}"; cat /tmp/check.txt) >>"$OUT/check.txt"
done
for c in sampled gpu waves ranges copies; do
	s=$SECONDS
	CK_RUN_CASE=$c timeout $((590 - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"/tmp/tcase_$c.txt" 2>&1
	echo "tcase $c rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_$c.txt)"
	(echo "== tcase $c"; cat "/tmp/tcase_$c.txt") >>"$OUT/tcases.txt"
done
echo "done at $SECONDS s"
