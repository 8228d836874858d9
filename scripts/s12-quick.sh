# session 12: a quick device pass: build, the indexer's GPU test, traced one-row calls, one bench line each
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
cmake -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { echo BUILD FAILED; tail -30 "$OUT/build.log"; exit 1; }
ctest --test-dir build-gpu -R "${CTEST_R:-kernels_gpu_indexer}" --output-on-failure --timeout 300 >"$OUT/ctest.txt" 2>&1; grep -E "tests passed|Failed|\*\*\*|differences" "$OUT/ctest.txt" | head -20
for f in fp8 mxfp4; do STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 --wgmma --reps 2 2>&1 | grep -E "gdbg|idx-trace" | tail -2; done
timeout 100 build-gpu/strata bench indexer --ctx ${CTX:-1M} --batch 1,8 --rows 1 --fmt fp8,mxfp4 --q8 --wgmma 2>&1 | grep -E "^(fp8|mxfp4) " | awk '{print $1,$3,$4,$9,$14}'
