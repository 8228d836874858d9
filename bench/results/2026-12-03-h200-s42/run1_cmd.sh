#!/usr/bin/env bash
# s42 run 1: the staged filing (s41 staged.patch) with its sample stored, not added.
# s41's next_cmd.sh (run 0 here) put the staged loops' slowdown on the sample itself
# (no sample: +2.5 / +7 us at 1M batch 8 FP8 / MXFP4; with it +20 / +17). Here each
# sampled key's bucket goes to its own 16-bit slot (plain store; samp_store), and the
# sampling CTA builds the row's histogram from the slots in shared memory once the count
# is in. old = the filter path (STAGED=0); atom = staged with bin atomics (STORE=0);
# store = staged with stored slots (default). --check, traces, the sampled tcase.
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
timeout 120 build-gpu/strata bench indexer --check --ctx 128K,512K,1M --batch 8,32 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$? $((SECONDS - s)) s: $(grep -E '^(fp8|mxfp4) ' "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
pts() { # LABEL STAGED STORE CTX BATCH
	STRATA_IDX_SAMP_STAGED=$2 STRATA_IDX_SAMP_STORE=$3 timeout 90 build-gpu/strata \
		bench indexer --ctx $4 --batch $5 --rows 1 --fmt mxfp4,fp8 --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	pts "old   r$r" 0 1 1M,512K 8
	pts "atom  r$r" 1 0 1M,512K 8
	pts "store r$r" 1 1 1M,512K 8
done | tee "$OUT/ab.txt"
for r in 1; do
	pts "old   r$r" 0 1 128K 32,64
	pts "store r$r" 1 1 128K 32,64
done | tee -a "$OUT/ab.txt"
for f in mxfp4 fp8; do
	echo "== 1M batch 8 $f store"
	STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer \
		--ctx 1M --batch 8 --rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 | grep -E "idx-" | tail -8 | cut -c1-900
done >"$OUT/traces.txt" 2>&1
grep -E "^==|loop end|idx-trace" "$OUT/traces.txt" | cut -c1-400
s=$SECONDS
CK_RUN_CASE=sampled timeout 150 build-gpu/tests/kernels_gpu_indexer >/tmp/tcase_sampled.txt 2>&1
echo "tcase sampled rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_sampled.txt)" | tee -a "$OUT/tcases_summary.txt"
echo "done at $SECONDS s"
