#!/usr/bin/env bash
# session 11 diagnostic: warm vs cold L2 timelines, ncu of the filter kernel
set -u
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
t0=$(date +%s); stamp() { echo "[$(($(date +%s)-t0))s] $*"; }
cmake -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-gpu -j16 --target strata_cli >$OUT/build.log 2>&1; stamp build $?
B=build-gpu/strata
for l2 in cold warm; do
  for f in fp8 mxfp4; do
    STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 --wgmma --reps 8 --l2 $l2 >$OUT/tr_${f}_$l2.txt 2>&1
  done
done
STRATA_IDX_TRACE=1 timeout 60 $B bench indexer --ctx 128K --batch 1 --rows 1 --fmt fp8 --q8 --wgmma --reps 8 >$OUT/tr_fp8_128k.txt 2>&1
stamp traces
timeout 150 ncu --set full --import-source no -k regex:filter_kernel --launch-skip 3 -c 1 -o $OUT/ncu_filt $B bench indexer --ctx 1M --batch 1 --rows 1 --fmt fp8 --q8 --wgmma --reps 2 >$OUT/ncu.log 2>&1
stamp ncu $?
ncu -i $OUT/ncu_filt.ncu-rep --page details >$OUT/details_filt.txt 2>&1
ncu -i $OUT/ncu_filt.ncu-rep --page source --csv --print-source sass >$OUT/sass_filt.csv 2>&1
rm -f $OUT/ncu_filt.ncu-rep
stamp done
