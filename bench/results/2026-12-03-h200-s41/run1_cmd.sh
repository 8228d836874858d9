#!/usr/bin/env bash
# s41 run 1: the staged filing (samp_staged): the sampled tail for one-row batches whose
# one wave of scan CTAs holds more scores than samp_tail (1M / 512K batch 8, 128K batch
# 32 / 64). One binary: STRATA_IDX_SAMP_STAGED=1 (new) against 0 (the filter, as before),
# alternated, 2 rounds; the sampled tcase (new staged cases), --check, traces, gpu tcase.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j16 --target strata_cli kernels_gpu_indexer >/tmp/build_new.log 2>&1 ||
	{ grep -E "error" /tmp/build_new.log | head; tail -20 /tmp/build_new.log; exit 1; }
echo "built in $SECONDS s"
s=$SECONDS
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_sampled.txt 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_sampled.txt)" | tee -a "$OUT/tcases_summary.txt"
cp /tmp/tcase_sampled.txt "$OUT/tcase_sampled.txt"
s=$SECONDS
timeout 120 build-gpu/strata bench indexer --check --ctx 128K,512K,1M --batch 8,32 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
pts() { # LABEL STAGED CTX BATCH FMT
	STRATA_IDX_SAMP_STAGED=$2 timeout 90 build-gpu/strata bench indexer --ctx "$3" --batch "$4" --rows 1 \
		--fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "new r$r" 1 1M,512K 8 mxfp4,fp8
	pts "old r$r" 0 1M,512K 8 mxfp4,fp8
	pts "new r$r" 1 128K 32,64 mxfp4,fp8
	pts "old r$r" 0 128K 32,64 mxfp4,fp8
	pts "new r$r" 1 1M,128K 1 mxfp4,fp8
	pts "new r$r" 1 128K 8 mxfp4,fp8
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
for st in 1 0; do
	for f in mxfp4 fp8; do
		echo "== 1M batch 8 $f staged=$st"
		STRATA_IDX_SAMP_STAGED=$st STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer --ctx 1M --batch 8 \
			--rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -7
	done
done >"$OUT/traces.txt" 2>&1
s=$SECONDS
CK_RUN_CASE=gpu timeout 150 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_gpu.txt 2>&1
echo "tcase gpu rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_gpu.txt)" | tee -a "$OUT/tcases_summary.txt"
grep -v "^ok\|passed" /tmp/tcase_gpu.txt | tail -30 > "$OUT/tcase_gpu_tail.txt"
echo "done at $SECONDS s"
