export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
(cmake -S build-alt/h -B build-alt/bh -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-alt/bh -j8 --target strata_cli > $OUT/bh.log 2>&1) &
cmake -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-gpu -j8 --target strata_cli > $OUT/bm.log 2>&1; wait
for i in 1 2; do
  for v in M h; do [ $i = 2 ] && v=$([ $v = M ] && echo h || echo M); b=build-gpu/strata; [ $v = h ] && b=build-alt/bh/strata
    for a in "--ctx 512K --batch 32 --rows 1,2,4" "--ctx 1M --batch 64 --rows 1,2"; do
      timeout 100 $b bench indexer $a --fmt mxfp4 --q8 --wgmma 2>&1 | grep -E "^mxfp4 " | awk -v l="$v $i" '{print l, $1, $3, $4, "rows", $5, "graph", $9, "eff", $14, "roof", $13}'
    done
  done
done | tee $OUT/pts.txt
