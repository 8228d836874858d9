#!/usr/bin/env bash
# Nsight Compute on the indexer's wgmma scan, the working tree against commits prepared
# with `scripts/gpu-ab.sh prepare REV...` (build-alt/REV): per side, the full set of one
# scan launch (stall reasons, pipes, memory) and its SASS with per-line samples, into
# OUT/all.tgz. Run on the GPU machine with carry [".deps", "build-alt"].
#
#   usage: OUT=... [NCU_ARGS="bench indexer ..."] [NCU_K=regex] scripts/gpu-ncu.sh REV...
set -u
deps=$PWD/.deps
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu
out=$(mktemp -d)
trap 'tar czf "${OUT:-$PWD/gpu-out}/all.tgz" -C "$out" .' EXIT
mkdir -p "${OUT:-$PWD/gpu-out}"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0))s] $*"; }
(cmake -B build-gpu -DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >"$out/cfg_M.log" 2>&1 &&
	cmake --build build-gpu -j10 --target strata_cli >"$out/build_M.log" 2>&1
	stamp "build M rc=$?") &
for v in "$@"; do
	(cmake -S "build-alt/$v" -B "build-alt/b$v" -DCMAKE_PREFIX_PATH="$deps/usr" \
		-DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >"$out/cfg_$v.log" 2>&1 &&
		cmake --build "build-alt/b$v" -j6 --target strata_cli >"$out/build_$v.log" 2>&1
	stamp "build $v rc=$?") &
done
wait
args=${NCU_ARGS:-bench indexer --ctx 1M --batch 8 --rows 1 --fmt fp8 --q8 --wgmma --reps 2}
k=${NCU_K:-regex:scan_wgmma}
for v in M "$@"; do
	b=build-alt/b$v/strata
	[ "$v" = M ] && b=build-gpu/strata
	timeout 150 ncu --set full --import-source no -k "$k" --launch-skip 3 -c 1 -o "$out/ncu_$v" \
		"$b" $args >"$out/ncu_$v.log" 2>&1
	stamp "ncu $v rc=$?"
	ncu -i "$out/ncu_$v.ncu-rep" --page details >"$out/details_$v.txt" 2>&1
	ncu -i "$out/ncu_$v.ncu-rep" --page source --csv --print-source sass >"$out/sass_$v.csv" 2>&1
	grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Issue Slots Busy|DRAM Throughput|Warp Cycles Per Issued|No Eligible|Stall" "$out/details_$v.txt" | head -30
done
stamp done
