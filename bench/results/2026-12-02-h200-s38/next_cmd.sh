#!/usr/bin/env bash
# Prepared in session 38 (not run). On HEAD (carry .deps, a clean tree; ~3 min after the
# build): Nsight Compute (it read the counters on this machine kind in s38) on the
# kernels of the one-row chain that s38's run 1 did not profile: the select after the
# sampled tail (select_list_kernel: its ~4.7 us of phases, which stall where?) for both
# formats at 1M keys, and the FP8 one-row scan (scan_ss_kernel, sampled tail); then the
# one-row MXFP4 scan at batch 8 (the one-set loop), whose output s38 lost to the call's
# file count. Each profile leaves its details page and its SASS with stall samples
# (source csv, gzipped): 8 files at most come back, so the logs are folded into one.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -S . -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >/tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
echo "built in $SECONDS s"
B=build-gpu/strata
prof() { # NAME FMT BATCH REGEX
	timeout 150 ncu --clock-control none -k "regex:$4" --launch-skip 4 -c 1 --set full \
		--import-source no -f -o "/tmp/$1" $B bench indexer --ctx 1M --batch "$3" --rows 1 \
		--fmt "$2" --q8 --wgmma --reps 3 >>"$OUT/ncu.log" 2>&1
	echo "ncu $1 rc=$? at $SECONDS s" | tee -a "$OUT/ncu.log"
	[ -f "/tmp/$1.ncu-rep" ] || return
	ncu -i "/tmp/$1.ncu-rep" --page details >"/tmp/$1_details.txt" 2>&1
	ncu -i "/tmp/$1.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$OUT/$1_source.csv.gz"
}
prof sel_mx mxfp4 1 select_list && prof sel_fp8 fp8 1 select_list && prof ss_fp8 fp8 1 scan_ss &&
	prof rs_b8 mxfp4 8 scan_rs
cat /tmp/*_details.txt >"$OUT/details.txt" 2>/dev/null
ls -la "$OUT"
