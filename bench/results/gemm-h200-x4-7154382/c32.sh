set -u
cd build-carry && tar xJf bins.tar.xz && cd ..
export NVFP4_BIN=build-carry/nvfp4tool NVFP4_COMMIT="$(cat build-carry/commit.txt)"
. tests/gpu/device-env.sh
O=$OUT
T0=$(date +%s)
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for b in nvfp4tool nvfp4tool-x4; do
  $CUOBJ -sass build-carry/$b 2>/dev/null | awk '/Function : /{keep = ($0 ~ /wg_tile_callILi128ELi128E/)} keep' > $O/sass-$b.txt
  echo "$b: $(grep -c HGMMA $O/sass-$b.txt) HGMMA, $(grep -c 'WARPGROUP.DEPBAR' $O/sass-$b.txt) WARPGROUP.DEPBAR"
  grep -E "HGMMA|WARPGROUP" $O/sass-$b.txt | head -12
done
xz -6 $O/sass-*.txt
echo "# cmp x4 (new) vs head (old), tokens 3000" > $O/cmp.txt
NVFP4_BIN=build-carry/nvfp4tool-x4 NVFP4_OLD_BIN=build-carry/nvfp4tool NVFP4_CMP_TOKENS=3000 timeout 60 bash tests/gpu/device-cmp-bin.sh 2>&1 | tail -8 >> $O/cmp.txt
cat $O/cmp.txt
NVFP4_AB_ROUNDS=3 NVFP4_AB_SHAPES="deepseek-v3:2048,4096 qwen3-30b-a3b:1024,2048,4096 gpt-oss-120b:512,2048,4096" \
  timeout 100 bash tests/gpu/device-ab.sh v16 x4:BIN=build-carry/nvfp4tool-x4 > $O/ab.txt 2>&1; echo "ab rc=$? ($(( $(date +%s) - T0 )) s)"
python3 tests/gpu/ab_table.py $O/ab.txt 2>&1 | tee $O/ab-table.txt
echo "all done ($(( $(date +%s) - T0 )) s)"
