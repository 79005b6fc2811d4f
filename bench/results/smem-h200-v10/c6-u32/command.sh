set -u
cd build-carry && tar xJf bins.tar.xz && cd ..
export NVFP4_BIN=build-carry/nvfp4tool NVFP4_TESTS=build-carry/tests NVFP4_COMMIT=07260db
. tests/gpu/device-env.sh
O=$OUT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $O/smi.txt 2>&1
NVFP4_AB_SHAPES="deepseek-v3:8,16,64,128,256 qwen3-30b-a3b:8,64,128" timeout 150 bash tests/gpu/device-ab.sh \
  old:BIN=build-carry/old/nvfp4tool new > $O/ab.txt 2>&1
echo "ab rc=$?"
NVFP4_MOE_TOKENS=1,8,16,64,128,256,512,1024,2048,4096 NVFP4_SKIP_CONVERT=1 NVFP4_OLD_BIN=build-carry/old/nvfp4tool \
  OUT=$O/final timeout 400 bash tests/gpu/device-final.sh > /dev/null 2>&1
echo "final rc=$?"
grep -E "PASS|FAIL|IDENT|DIFFER|rc=" $O/final/log.txt
NVFP4_NCU_TOKENS=128 OUT=/tmp/ncu timeout 100 bash tests/gpu/device-ncu.sh > $O/ncu-run.txt 2>&1; echo "ncu rc=$?"
cp /tmp/ncu/res/ncu-128.txt $O/ 2>/dev/null
CU=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CU -sass -fun "_Z15moe_gemm_kernelILi1ELi4ELi1ELi4ELi2ELb1ELi2ELi4ELi1EEvPflPKtiPKhS4_lli17nvf_cuda_moe_plan" build-carry/nvfp4tool 2>/dev/null | grep -E "^\s+/\*[0-9a-f]{4}\*/" > $O/sass-v10.txt
cat $O/ab.txt
grep -E "^v10 deepseek" $O/final/log.txt
