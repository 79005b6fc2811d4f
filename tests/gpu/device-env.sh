# Sourced by the tests/gpu/device-*.sh scripts, from the repository root, on the device machine:
# unpack the carried .debs/ (libyaml, cJSON) into /tmp/deps (never into /), put their libraries on
# LD_LIBRARY_PATH, and export what the CLI tests read: BIN and NVFP4TOOL (the carried binary,
# NVFP4_BIN, default build-gpu/nvfp4tool), NVFP4_TESTDATA, NVFP4_SCHEMAS, NVFP4_PYTHON and
# NVFP4_SOURCE_DIR.
deps=/tmp/deps
mkdir -p "$deps"
for f in .debs/*.deb; do dpkg -x "$f" "$deps"; done
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=$PWD/${NVFP4_BIN:-build-gpu/nvfp4tool}
export NVFP4TOOL=$BIN NVFP4_TESTDATA=$PWD/tests/data NVFP4_SCHEMAS=$PWD/schemas NVFP4_PYTHON=python3
export NVFP4_SOURCE_DIR=$PWD
