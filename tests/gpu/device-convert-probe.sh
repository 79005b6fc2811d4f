#!/usr/bin/env bash
# Runs on the device machine: where the large conversion's time goes. Prints the CPU model and
# flags, OpenSSL's SHA-256 rate on one core, sha256sum of the ~23 GB synthetic FP8 source cold
# and warm, then converts it with --device cuda twice (page cache dropped, then warm), sampling
# every ~2 s the threads above 15% CPU (top -H) and the process's read/write bytes.
#   NVFP4_TOOL=path/to/nvfp4tool tests/gpu/device-convert-probe.sh
set -u
cd "$(dirname "$0")/../.."
deps=/tmp/deps; mkdir -p $deps; for f in .debs/*.deb; do dpkg -x "$f" $deps; done
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu
tool=${NVFP4_TOOL:-$PWD/build-gpu/nvfp4tool}
work=/tmp/probe; rm -rf $work; mkdir -p $work
lscpu | grep -iE "model name|^CPU\(s\)|flags" | sed 's/flags.*\(sha_ni\).*/flags: has sha_ni/' | head -3
openssl speed -evp sha256 -bytes 1048576 -seconds 2 2>/dev/null | tail -1
df -h /tmp | tail -1
big=$work/big
$tool synth $big --preset deepseek-v3 --dtype fp8-block --hidden 7168 --moe-intermediate 2048 --experts 256 --layers 3 --max-shard-size 5GB --quiet >/dev/null
ls -la $big | head
sync; echo 3 > /proc/sys/vm/drop_caches
t0=$(date +%s.%N); sha256sum $big/*.safetensors > /dev/null; t1=$(date +%s.%N)
echo "sha256sum cold: $(python3 -c "print($t1-$t0)") s"
t0=$(date +%s.%N); sha256sum $big/*.safetensors > /dev/null; t1=$(date +%s.%N)
echo "sha256sum warm: $(python3 -c "print($t1-$t0)") s"
for run in cold warm; do
  rm -rf $work/out; sync
  [ $run = cold ] && echo 3 > /proc/sys/vm/drop_caches
  $tool convert $big $work/out --device cuda --quiet --json > $work/c.json &
  pid=$!
  t0=$(date +%s.%N)
  while kill -0 $pid 2>/dev/null; do
    cpu=$(top -H -b -n 2 -d 1 -p $pid 2>/dev/null | awk '/^top -/{n++} n==2 && $1 ~ /^[0-9]+$/ && $9+0>15 {print int($9)}' | sort -rn | tr '\n' ' ')
    echo "t=$(python3 -c "print(round($(date +%s.%N)-$t0,1))") threads>15%: $cpu| io: $(grep -E "^(read|write)_bytes" /proc/$pid/io 2>/dev/null | awk '{printf "%s=%.1fG ", $1, $2/1e9}')"
    sleep 1
  done
  wait $pid
  echo "convert $run: $(python3 -c "import json;d=json.load(open('$work/c.json'));print(d['seconds'])") s"
done
