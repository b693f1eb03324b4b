#!/bin/sh
# Link libibverbs.so.1 from the crate's staticlib with rdma-core's symbol
# versions: link.sh LIB.a OUTDIR (used by `make abi` and the tests).
set -e
here=$(dirname "$0")
mkdir -p "$2"
${CC:-cc} -shared -o "$2/libibverbs.so.1.tmp" -Wl,-soname,libibverbs.so.1 \
	-Wl,--version-script="$here/libibverbs.map" -Wl,--gc-sections \
	-Wl,--whole-archive "$1" -Wl,--no-whole-archive -lpthread -ldl -lm -lgcc_s -lc
mv "$2/libibverbs.so.1.tmp" "$2/libibverbs.so.1"
