#!/usr/bin/env bash
# Session 39, run 4: the select of a sampled tail waiting for the row's done count (each
# scan CTA and the sampler release-add to it; the select, let launch at the scan's
# start, acquires it) instead of the scan grid's completion: STRATA_IDX_POLL=1 against
# =0 (one build, the working tree: also the one-set loops' rs_read with its nibble reads
# first again) and 4f701ea (base: build-alt/base-src), 3 rounds; --check, the `sampled`
# and `gpu` tcases with POLL=1; a traced call each way. Carry .deps, build-alt/base-src.
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
	for b in poll0 poll1 base; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata
		P=0; [ $b = poll1 ] && P=1
		STRATA_IDX_POLL=$P pts "$b r$r" $B 1M,512K,256K,128K 1 fp8,mxfp4
		STRATA_IDX_POLL=$P pts "$b r$r" $B 1M,128K 8 fp8,mxfp4
	done
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
for P in 1 0; do
	STRATA_IDX_POLL=$P timeout 60 build-gpu/strata bench indexer --check --ctx 128K,1M --batch 1,8 \
		--rows 1,2,4 --fmt fp8,mxfp4 --q8 --wgmma >/tmp/check.txt 2>&1
	echo "check POLL=$P rc=$?: $(grep -E '^(fp8|mxfp4) ' /tmp/check.txt | awk '{print $(NF-3)}' | sort | uniq -c | tr '\n' ' ')"
	(echo "== POLL=$P"; cat /tmp/check.txt) >>"$OUT/check.txt"
done
for P in 1 0; do
	for f in mxfp4 fp8; do
		echo "== POLL=$P $f"
		STRATA_IDX_POLL=$P STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer --ctx 1M --batch 1 \
			--rows 1 --fmt $f --q8 --wgmma --reps 3 2>&1 | grep -E "idx-trace" | tail -2
	done
done >"$OUT/traces.txt" 2>&1
for c in sampled gpu; do
	s=$SECONDS
	STRATA_IDX_POLL=1 CK_RUN_CASE=$c timeout $((590 - SECONDS)) build-gpu/tests/kernels_gpu_indexer >"/tmp/tcase_$c.txt" 2>&1
	echo "tcase $c (POLL=1) rc=$? $((SECONDS - s)) s: $(tail -1 /tmp/tcase_$c.txt)"
	(echo "== tcase $c POLL=1"; cat "/tmp/tcase_$c.txt") >>"$OUT/tcases.txt"
done
echo "done at $SECONDS s"
