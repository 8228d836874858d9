set -u
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu
cmake -B build-gpu -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && cmake --build build-gpu -j16 --target strata_cli > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
B=build-gpu/strata
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 20 > $OUT/smi.csv 2>&1 &
P=$!
sleep 1
for pt in "fp8 --batch 32 --rows 2" "fp8 --batch 32 --rows 4" "mxfp4 --batch 32 --rows 4" "fp8 --batch 8 --rows 2"; do
  set -- $pt
  echo "== $pt start $(date +%H:%M:%S.%N)" >> $OUT/marks.txt
  timeout 100 $B bench indexer --ctx 1M --fmt $pt --q8 --wgmma --reps 40 2>&1 | grep -E "^(fp8|mxfp4) " | awk '{print $1,$4,$5,"idx",$7,"graph",$9}'
  echo "== $pt end $(date +%H:%M:%S.%N)" >> $OUT/marks.txt
done
sleep 0.5; kill $P
cat $OUT/marks.txt
awk -F', ' '{print $2, $4, $6}' $OUT/smi.csv | sort | uniq -c | sort -rn | head -25
