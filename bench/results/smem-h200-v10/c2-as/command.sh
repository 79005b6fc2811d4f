set -u
cd build-carry && tar xJf bins.tar.xz && cd ..
export NVFP4_BIN=build-carry/nvfp4tool NVFP4_TESTS=build-carry/tests
. tests/gpu/device-env.sh
O=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $O/smi.txt 2>&1
for s in 3 2; do
  NVFP4_MOE_GEMM=v10 NVFP4_MOE_ASTAGES=$s timeout 90 build-carry/tests/gpu_test_moe_cuda > $O/test-v10-as$s.log 2>&1
  echo "gpu_test_moe_cuda v10 as$s rc=$?"; tail -1 $O/test-v10-as$s.log
done
echo "== cmp v10 vs v8"
NVFP4_MOE_GEMM=v10 NVFP4_OLD_BIN=build-carry/old.sh timeout 90 bash tests/gpu/device-cmp-bin.sh 2>&1 | tee $O/cmp.txt
echo "== ab"
NVFP4_AB_SHAPES="deepseek-v3:8,16,64,128,256 qwen3-30b-a3b:8,64,128" timeout 200 bash tests/gpu/device-ab.sh \
  v8:NVFP4_MOE_GEMM=v8 as3:NVFP4_MOE_GEMM=v10 as2:NVFP4_MOE_GEMM=v10,NVFP4_MOE_ASTAGES=2 > $O/ab.txt 2>&1
echo "ab rc=$?"
cat $O/ab.txt
echo "== ncu"
NVFP4_MOE_GEMM=v10 NVFP4_NCU_TOKENS=128 OUT=/tmp/ncu timeout 100 bash tests/gpu/device-ncu.sh > $O/ncu-run.txt 2>&1; echo "ncu rc=$?"
cp /tmp/ncu/res/ncu-128.txt $O/ncu-v10-128.txt 2>/dev/null
grep -E "moe_gemm_kernel|Duration|DRAM Throughput|Issue Slots Busy|Eligible Warps|Registers Per|Achieved Occ|stalled" $O/ncu-v10-128.txt | head -30
CU=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CU -sass build-carry/nvfp4tool 2>/dev/null | c++filt | awk '/Function : moe_gemm_kernel<1, 4, 1, 4, 2, true, 2, 4, (0|3)>/{p=1; print; next} /Function :/{p=0} p' > $O/sass-16row.txt
wc -l $O/sass-16row.txt
