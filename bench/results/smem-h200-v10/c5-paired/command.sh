set -u
cd build-carry && tar xJf bins.tar.xz && cd ..
export NVFP4_BIN=build-carry/nvfp4tool NVFP4_TESTS=build-carry/tests
. tests/gpu/device-env.sh
O=$OUT
for v in v10 v11; do
  NVFP4_MOE_GEMM=$v timeout 90 build-carry/tests/gpu_test_moe_cuda > $O/test-$v.log 2>&1
  echo "gpu_test_moe_cuda $v rc=$?"; tail -n 1 $O/test-$v.log
  echo "== cmp $v vs v8"
  NVFP4_MOE_GEMM=$v NVFP4_OLD_BIN=build-carry/old.sh timeout 90 bash tests/gpu/device-cmp-bin.sh 2>&1 | tee $O/cmp-$v.txt
done
echo "== ab"
NVFP4_AB_SHAPES="deepseek-v3:8,16,64,128,256 qwen3-30b-a3b:8,64,128" timeout 200 bash tests/gpu/device-ab.sh \
  v8:NVFP4_MOE_GEMM=v8 v10:NVFP4_MOE_GEMM=v10 v11:NVFP4_MOE_GEMM=v11 > $O/ab.txt 2>&1
echo "ab rc=$?"
cat $O/ab.txt
CU=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for am in 0 1 2; do
  $CU -sass -fun "_Z15moe_gemm_kernelILi1ELi4ELi1ELi4ELi2ELb1ELi2ELi4ELi${am}EEvPflPKtiPKhS4_lli17nvf_cuda_moe_plan" build-carry/nvfp4tool 2>/dev/null | grep -E "^\s+/\*[0-9a-f]{4}\*/" > $O/sass-am$am.txt
  echo "sass am$am: $(wc -l < $O/sass-am$am.txt) lines"
done
echo "== ncu"
NVFP4_MOE_GEMM=v11 NVFP4_NCU_TOKENS=128 OUT=/tmp/ncu timeout 100 bash tests/gpu/device-ncu.sh > $O/ncu-run.txt 2>&1; echo "ncu rc=$?"
cp /tmp/ncu/res/ncu-128.txt $O/ncu-v11-128.txt 2>/dev/null
grep -E "moe_gemm_kernel|Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Registers Per|Achieved Occ" $O/ncu-v11-128.txt | head -30
