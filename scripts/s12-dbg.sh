export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-gpu -j16 --target strata_cli >/dev/null 2>&1 || echo BUILD FAILED
for f in fp8 mxfp4; do STRATA_IDX_TRACE=1 timeout 60 build-gpu/strata bench indexer --ctx 1M --batch 1 --rows 1 --fmt $f --q8 --wgmma --reps 2 2>&1 | grep -E "gdbg|idx-trace" | tail -4; done
