#!/usr/bin/env bash
# session 11: Nsight Compute of one indexer kernel with the finest warp sampling
# (NCU_K, default the select kernel; NCU_ARGS) into OUT: details, SASS with samples.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 \
	-DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 &&
	cmake --build build-gpu -j16 --target strata_cli >"$OUT/build.log" 2>&1 || exit 1
args=${NCU_ARGS:-bench indexer --ctx 1M --batch 1 --rows 1 --fmt fp8 --q8 --wgmma --reps 2}
timeout 200 ncu --set full --import-source no --warp-sampling-interval 0 \
	-k "${NCU_K:-regex:select_kernel}" --launch-skip 3 -c 1 -o "$OUT/ncu" \
	build-gpu/strata $args >"$OUT/ncu.log" 2>&1
echo "ncu rc=$?"
ncu -i "$OUT/ncu.ncu-rep" --page details >"$OUT/details.txt" 2>&1
ncu -i "$OUT/ncu.ncu-rep" --page source --csv --print-source sass >"$OUT/sass.csv" 2>&1
rm -f "$OUT/ncu.ncu-rep"
