#!/bin/sh
# Link librdmacm.so.1 from the crate's staticlib with rdma-core's symbol
# versions: link.sh LIB.a OUTDIR (used by `make abi` and the tests).
# OUTDIR must hold our libibverbs.so.1 already: librdmacm needs it, as
# rdma-core's does, and finds its functions there at run time.
set -e
here=$(dirname "$0")
mkdir -p "$2"
${CC:-cc} -shared -o "$2/librdmacm.so.1.tmp" -Wl,-soname,librdmacm.so.1 \
	-Wl,--version-script="$here/librdmacm.map" -Wl,--gc-sections \
	-Wl,--whole-archive "$1" -Wl,--no-whole-archive \
	-L"$2" -Wl,--no-as-needed -l:libibverbs.so.1 -lpthread -ldl -lm -lgcc_s -lc
mv "$2/librdmacm.so.1.tmp" "$2/librdmacm.so.1"
