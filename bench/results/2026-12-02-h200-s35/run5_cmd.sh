#!/usr/bin/env bash
# s35 run 4: refused (build-alt/binst was not carried: "not a directory"); run 5: the
# "gpu" tcase (and on, to the outer timeout) of kernels_gpu_indexer built from
# build-alt/inst (main + s34's sampled-tail-count-inst.patch), on a warm device.
mkdir -p $OUT; export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu; cmake -S build-alt/inst -B build-alt/binst -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release -DSTRATA_REV=inst > /dev/null 2>&1 && cmake --build build-alt/binst -j16 --target kernels_gpu_indexer > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }; echo built $SECONDS; CK_VERBOSITY=verbose timeout $((480 - SECONDS)) build-alt/binst/tests/kernels_gpu_indexer > $OUT/gpu_indexer_inst.txt 2>&1; echo "rc=$? t=$SECONDS"
