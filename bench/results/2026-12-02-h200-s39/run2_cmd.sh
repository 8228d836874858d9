#!/usr/bin/env bash
# Session 39, run 2: the MXFP4 conversion's tables by a warp-uniform branch, the key's
# half scale made directly, the score's -0 folded by one add (new = the working tree)
# against c193134 (run 1's kept change; base, carried as build-alt/base-src). 3 rounds.
# Then the new build's SASS of the one-row sampled-tail scans (gzipped), --check, and
# Nsight Compute on the select after the sampled tail (MXFP4 1M), with stall samples.
# Carry .deps and build-alt/base-src.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cfg() { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1; }
cfg . build-gpu && cfg build-alt/base-src build-alt/base || { echo "configure failed"; exit 1; }
cmake --build build-gpu -j10 --target strata_cli >"$OUT/build_new.log" 2>&1 &
cmake --build build-alt/base -j6 --target strata_cli >"$OUT/build_base.log" 2>&1 || { tail -20 "$OUT/build_base.log"; exit 1; }
wait $! || { tail -20 "$OUT/build_new.log"; exit 1; }
echo "built in $SECONDS s"
for b in build-gpu build-alt/base; do
	o=$(find $b -name 'indexer_wgmma*.o' | head -1)
	cuobjdump -sass "$o" 2>/dev/null | awk -v B=$b '
		/Function :/ { f=$3 }
		/^ +\/\*[0-9a-f]+\*\/ / && f ~ /scan_(rs|ss)_kernel/ { n[f]++ }
		END { for (f in n) printf "%s %s total %d\n", B, f, n[f] }'
done | sed 's/_ZN[^ ]*scan/scan/' | sort > "$OUT/sass_counts.txt"
cat "$OUT/sass_counts.txt"
o=$(find build-gpu -name 'indexer_wgmma*.o' | head -1)
cuobjdump -sass "$o" | awk '/Function :/ { p = ($3 ~ /scan_rs_kernelILi4ELb0ELi1ELb1E/) } p' | gzip >"$OUT/sass_rs_samp.txt.gz"
pts() { # LABEL BIN CTX BATCH FMT
	timeout 90 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2 3; do
	for b in new base; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata
		pts "$b r$r" $B 1M,256K,128K 1 fp8,mxfp4
		pts "$b r$r" $B 128K 8 fp8,mxfp4
	done
done | tee "$OUT/ab.txt"
echo "a/b done at $SECONDS s"
timeout 90 build-gpu/strata bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"; grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c
timeout 150 ncu --clock-control none -k "regex:select_list" --launch-skip 4 -c 1 --set full \
	--import-source no -f -o /tmp/sel_mx build-gpu/strata bench indexer --ctx 1M --batch 1 --rows 1 \
	--fmt mxfp4 --q8 --wgmma --reps 3 >"$OUT/ncu.log" 2>&1
echo "ncu rc=$? at $SECONDS s"
if [ -f /tmp/sel_mx.ncu-rep ]; then
	ncu -i /tmp/sel_mx.ncu-rep --page details >"$OUT/sel_mx_details.txt" 2>&1
	ncu -i /tmp/sel_mx.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >"$OUT/sel_mx_source.csv.gz"
fi
echo "done at $SECONDS s"
