#!/usr/bin/env bash
# Session 39, run 1: the tile's four wgmmas in one asm block (wgmma_rs4 / wgmma_ss4) and
# the sampled tail's scan CTAs skipping the unused shared histogram's zeroing (new = the
# working tree) against HEAD 020b1d5 (base, carried as build-alt/base-src); the one-row
# MXFP4 sampled tail on the one-set loop (STRATA_IDX_RS_ONE=1, new build) at 4 / 5 / 6
# CTAs an SM (STRATA_IDX_SAMP_PER_SM). SASS counts of the one-row kernels of both builds.
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
# SASS: per one-row kernel, total instructions and a few opcode counts
for b in build-gpu build-alt/base; do
	o=$(find $b -name 'indexer_wgmma*.o' | head -1)
	cuobjdump -sass "$o" 2>/dev/null | awk -v B=$b '
		/Function :/ { f=$3 } 
		/^ +\/\*[0-9a-f]+\*\/ / && f ~ /scan_(rs|ss)_kernel/ { n[f]++; op=$2; if (op ~ /^@/) op=$3; sub(/\..*/,"",op); sub(/;/,"",op); c[f" "op]++ }
		END { for (f in n) { printf "%s %s total %d R2UR %d QGMMA %d UIADD3 %d IMAD %d PRMT %d\n", B, f, n[f], c[f" R2UR"], c[f" QGMMA"], c[f" UIADD3"], c[f" IMAD"], c[f" PRMT"] } }'
done | sort > "$OUT/sass_counts.txt"
cat "$OUT/sass_counts.txt" | sed 's/_ZN[^ ]*scan/scan/' | cut -c1-160
pts() { # LABEL BIN CTX BATCH FMT
	timeout 90 "$2" bench indexer --ctx "$3" --batch "$4" --rows 1 --fmt "$5" --q8 --wgmma 2>&1 |
		grep -E "^(fp8|mxfp4) " | awk -v l="$1" '{print l, $1, $3, $4, "graph", $9, "eff", $14, $(NF-5), $(NF-4)}'
}
for r in 1 2; do
	for b in new base; do
		B=build-gpu/strata; [ $b = base ] && B=build-alt/base/strata
		pts "$b r$r" $B 1M,256K,128K 1 fp8,mxfp4
		pts "$b r$r" $B 128K 8 fp8,mxfp4
	done
	for c in 4 6; do
		STRATA_IDX_RS_ONE=1 STRATA_IDX_SAMP_PER_SM=$c pts "one$c r$r" build-gpu/strata 1M,256K,128K 1 mxfp4
		STRATA_IDX_RS_ONE=1 STRATA_IDX_SAMP_PER_SM=$c pts "one$c r$r" build-gpu/strata 128K 8 mxfp4
	done
	echo "round $r at $SECONDS s" >&2
done | tee "$OUT/ab.txt"
timeout 90 build-gpu/strata bench indexer --check --ctx 128K,1M --batch 1,8 --rows 1 \
	--fmt fp8,mxfp4 --q8 --wgmma >"$OUT/check.txt" 2>&1
echo "check rc=$?"; grep -E "^(fp8|mxfp4) " "$OUT/check.txt" | awk '{print $(NF-3)}' | sort | uniq -c
STRATA_IDX_RS_ONE=1 STRATA_IDX_SAMP_PER_SM=6 timeout 60 build-gpu/strata bench indexer --check --ctx 128K,1M \
	--batch 1,8 --rows 1 --fmt mxfp4 --q8 --wgmma >"$OUT/check_one6.txt" 2>&1
echo "check one6 rc=$?"; grep -E "^(fp8|mxfp4) " "$OUT/check_one6.txt" | awk '{print $(NF-3)}' | sort | uniq -c
echo "done at $SECONDS s"
