#!/usr/bin/env bash
# Unpacks Debian bookworm's own QEMU 7.2 into DIR (target/qemu-7.2 from the
# Makefile), beside the installed QEMU and without installing it, so the two
# can be measured in one run (`make bench-qemu`). Idempotent, quiet.
#
# The packages are the ones bookworm's qemu-system-x86 7.2 depends on for its
# code, data and firmware, each at bookworm's version: qemu-system-x86 and
# qemu-system-common (the binary and its modules: TCG itself is one), qemu-
# system-data (option ROMs: pvh.bin, linuxboot_dma.bin), seabios and
# ipxe-qemu (bookworm's builds, which bookworm-backports may have replaced on
# the machine). QEMU finds its modules and firmware relative to its binary
# (a relocatable install), so DIR/usr/bin/qemu-system-x86_64 runs as it is:
# point APPLIANCE_QEMU at it. Its shared libraries are bookworm's own, which
# a bookworm machine has (the script says which are missing otherwise).
set -euo pipefail
SUDO=${SUDO-}
dir=${1:?usage: qemu-7.2.sh DIR}
bin=$dir/usr/bin/qemu-system-x86_64

if [[ -x $bin ]] && "$bin" --version 2>/dev/null | grep -q 'version 7\.2\.'; then exit 0; fi

# The newest version of package $1 from bookworm itself (its main or
# security suite, not backports) whose version starts with $2.
bookworm_version() {
    apt-cache madison "$1" 2>/dev/null |
        awk -F'|' -v want="$2" '
            { v = $2; gsub(/ /, "", v) }
            $3 ~ /[ \/]bookworm(-security|-updates)?\/main / && index(v, want) == 1 { print v; exit }'
}

qemu=$(bookworm_version qemu-system-x86 1:7.2+)
if [[ -z $qemu ]]; then
    $SUDO apt-get update -qq >/dev/null
    qemu=$(bookworm_version qemu-system-x86 1:7.2+)
fi
if [[ -z $qemu ]]; then
    echo "qemu-7.2: apt knows no qemu-system-x86 7.2 from bookworm (apt-cache madison qemu-system-x86)" >&2
    exit 1
fi
pkgs=("qemu-system-x86=$qemu" "qemu-system-common=$qemu")
for p in qemu-system-data:1:7.2+ seabios: ipxe-qemu:; do
    name=${p%%:*} prefix=${p#*:}
    v=$(bookworm_version "$name" "$prefix")
    [[ -n $v ]] || { echo "qemu-7.2: no bookworm version of $name" >&2; exit 1; }
    pkgs+=("$name=$v")
done

echo "unpacking bookworm's QEMU $qemu into $dir ..."
rm -rf "$dir"
mkdir -p "$dir/debs"
# apt-get download writes into the current directory; as root it warns that
# its sandbox user cannot write there, which is harmless.
(cd "$dir/debs" && apt-get download -qq "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
for deb in "$dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dir"
done
[[ -x $bin ]] || { echo "qemu-7.2: $bin is missing after unpacking ${pkgs[*]}" >&2; exit 1; }
missing=$(ldd "$bin" | awk '/not found/ { print $1 }')
if [[ -n $missing ]]; then
    echo "qemu-7.2: libraries missing for $bin (install bookworm's packages that hold them):" $missing >&2
    exit 1
fi
"$bin" --version | head -n 1
