#!/usr/bin/env bash
# Builds the Linux rdma_rxe peer guest from Debian bookworm packages, once:
#   target/linux-peer/vmlinuz          the bookworm kernel (linux-image-amd64)
#   target/linux-peer/initramfs.cpio   an uncompressed newc initramfs: busybox-static
#                                      as init and shell, the rxe modules, iproute2
#                                      (ip, rdma), rdma-core (libibverbs, librdmacm,
#                                      the rxe provider), ibverbs-utils, perftest,
#                                      rdmacm-utils and their shared libraries,
#                                      ext_verbs (ext_verbs.c) and mcast_join
#                                      (mcast_join.c), compiled here, and the
#                                      kernel module kfrmr (kfrmr.c, built here
#                                      against Debian's linux-headers for the
#                                      peer's kernel) in /lib/modules/test/,
#                                      which init does not load.
# Nothing here is committed: the packages are downloaded at build time into a
# debootstrap root (target/linux-peer/rootfs) and the needed files copied out.
# Idempotent: when both outputs exist it does nothing. Quiet: the details go to
# target/linux-peer/build.log, whose end is printed on failure.
#
# Environment: LINUX_PEER_DIR overrides the output directory; DEBIAN_MIRROR the
# mirror debootstrap uses (its default when unset).
#
# PEER_KERNEL=backports builds a second peer, in <output directory>-backports
# (LINUX_PEER_BACKPORTS_DIR overrides it), from the same Debian root and the
# same userspace but bookworm-backports' linux-image-amd64: a kernel whose rxe
# has ATOMIC WRITE and FLUSH (6.2 on; bookworm's 6.1 has neither). The apt
# entry is this machine's own: the URI its sources give suite bookworm, with
# suite bookworm-backports. The default peer keeps bookworm's kernel.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BASE_OUT=${LINUX_PEER_DIR:-$ROOT/target/linux-peer}
PEER_KERNEL=${PEER_KERNEL:-bookworm}
case $PEER_KERNEL in
bookworm) OUT=$BASE_OUT ;;
backports) OUT=${LINUX_PEER_BACKPORTS_DIR:-$BASE_OUT-backports} ;;
*)
    echo "linux-peer: PEER_KERNEL is bookworm (the default) or backports, not $PEER_KERNEL" >&2
    exit 2
    ;;
esac
SUITE=bookworm

# The outputs are current when they exist and were built from this script, this
# init and the C programs compiled into it (an edit to any rebuilds the
# initramfs; the Debian root is kept).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Test programs of our own, compiled on this machine (those that use verbs
# against Debian's libibverbs-dev: the same bookworm libibverbs the guest runs).
C_PROGRAMS=(ext_verbs mcast_join)
# Kernel modules of our own, built against the peer kernel's headers: only
# into the default peer (the backports peer boots for ATOMIC WRITE alone).
KMODULES=()
[[ $PEER_KERNEL == bookworm ]] && KMODULES=(kfrmr)
C_SOURCES=()
for p in "${C_PROGRAMS[@]}" "${KMODULES[@]}"; do C_SOURCES+=("$HERE/$p.c"); done
INPUTS=$({ cat "$HERE/build.sh" "$HERE/init" "${C_SOURCES[@]}"; echo "$PEER_KERNEL"; } | sha256sum | cut -d' ' -f1)
[[ -s $OUT/vmlinuz && -s $OUT/initramfs.cpio && $(cat "$OUT/inputs" 2>/dev/null) == "$INPUTS" ]] && exit 0

# The modules init loads (with their modules.dep dependencies, in order).
# crc32_generic: rdma_rxe asks the crypto API for "crc32" (its ICRC) and fails to
# add a link without it. rdma_ucm (rdma_cm) is extra: rping, ucmatose and perftest -R
# need /dev/infiniband/rdma_cm. e1000e and igb: the wire NIC may be QEMU's 82574L or
# 82576 (APPLIANCE_NIC); they load before virtio_net so that the wire, whichever
# model, probes first and is eth0, and the management NIC (virtio) eth1.
MODULES=(e1000e igb failover net_failover virtio_net udp_tunnel ip6_udp_tunnel crc32_generic ib_core ib_uverbs rdma_rxe rdma_ucm)
# Userspace packages installed into the debootstrap root.
# kmod gives depmod: the kernel package ships no modules.dep (its postinst makes it).
PACKAGES=(busybox-static iproute2 libibverbs1 ibverbs-providers ibverbs-utils perftest librdmacm1 rdmacm-utils kmod)

SUDO=
[[ $(id -u) -eq 0 ]] || SUDO=sudo
mkdir -p "$OUT"
LOG=$OUT/build.log
: >"$LOG"
started=$SECONDS

fail() {
    echo "linux-peer: $*" >&2
    echo "--- last lines of $LOG ---" >&2
    tail -n 30 "$LOG" >&2
    exit 1
}
say() { echo "linux-peer: $*"; }

# Host tools: debootstrap (the root), cpio (the archive), chroot (coreutils).
need=()
command -v debootstrap >/dev/null || [[ -x /usr/sbin/debootstrap ]] || need+=(debootstrap)
command -v cpio >/dev/null || need+=(cpio)
if ((${#need[@]})); then
    say "installing ${need[*]} ..."
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"; } \
        >>"$LOG" 2>&1 || fail "cannot install ${need[*]}"
fi
export PATH=$PATH:/usr/sbin:/sbin

RFS=$BASE_OUT/rootfs
in_root() { $SUDO chroot "$RFS" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

# 1. The Debian root, with the packages installed (a marker makes it resumable).
say "[1/4] the Debian root in $RFS ..."
if [[ $(cat "$RFS/.peer-packages-done" 2>/dev/null) != "${PACKAGES[*]}" ]]; then
    if [[ ! -e $RFS/.debootstrap-done ]]; then
        say "debootstrap $SUITE (minbase) into $RFS (about a minute) ..."
        $SUDO rm -rf "$RFS"
        $SUDO debootstrap --variant=minbase "$SUITE" "$RFS" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >>"$LOG" 2>&1 ||
            fail "debootstrap failed"
        $SUDO touch "$RFS/.debootstrap-done"
    fi
    say "installing ${PACKAGES[*]} and downloading linux-image-amd64 ..."
    {
        in_root apt-get update -qq &&
            in_root apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" &&
            in_root apt-get install -y -qq --no-install-recommends --download-only linux-image-amd64
    } >>"$LOG" 2>&1 || fail "apt-get in the root failed"
    echo "${PACKAGES[*]}" | $SUDO tee "$RFS/.peer-packages-done" >/dev/null
fi

# 1b. The backports kernel, downloaded into the same root's apt cache.
# Backports versions end in ~bpo12+N: that tells the two kernels' packages apart.
if [[ $PEER_KERNEL == backports ]]; then
    uri=$(awk '/^URIs:/ { u = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") { print u; exit } }' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [[ -n $uri ]] || uri=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
    [[ -n $uri ]] || fail "no apt source for suite bookworm on this machine to derive bookworm-backports from"
    say "downloading bookworm-backports' linux-image-amd64 from $uri ..."
    echo "deb $uri bookworm-backports main" | $SUDO tee "$RFS/etc/apt/sources.list.d/peer-backports.list" >/dev/null
    {
        in_root apt-get update -qq &&
            in_root apt-get install -y -qq --no-install-recommends --download-only -t bookworm-backports linux-image-amd64
    } >>"$LOG" 2>&1 || fail "cannot download bookworm-backports' linux-image-amd64"
    pick=(grep -- '~bpo')
else
    pick=(grep -v -- '~bpo')
fi

# 2. The kernel: vmlinuz and the modules, extracted from the package.
say "[2/4] extracting the kernel and its modules ($((SECONDS - started)) s so far) ..."
KDEB=$(ls "$RFS"/var/cache/apt/archives/linux-image-[0-9]*-amd64_*.deb 2>/dev/null | grep -v -- '-dbg_' | "${pick[@]}" | sort -V | tail -n 1 || true)
[[ -n $KDEB ]] || fail "no $PEER_KERNEL linux-image .deb in $RFS/var/cache/apt/archives"
KDIR=$RFS/opt/peer-kernel
$SUDO rm -rf "$KDIR"
$SUDO dpkg-deb -x "$KDEB" "$KDIR" || fail "cannot extract $KDEB"
KVER=$(ls "$KDIR/lib/modules" | head -n 1)
MODDIR=$KDIR/lib/modules/$KVER
in_root depmod -b /opt/peer-kernel "$KVER" >>"$LOG" 2>&1 || fail "depmod failed"
[[ -f $MODDIR/modules.dep ]] || fail "no modules.dep for $KVER"

# modules.dep lines: "kernel/path/name.ko: kernel/dep1.ko kernel/dep2.ko".
declare -A DEPS PATHOF
while IFS= read -r line; do
    mod=${line%%:*}
    name=$(basename "$mod")
    name=${name%%.ko*}
    name=${name//-/_}
    PATHOF[$name]=$mod
    DEPS[$name]=${line#*:}
done <"$MODDIR/modules.dep"

ORDER=()
declare -A SEEN
visit() { # depth-first: every dependency before the module itself
    local name=$1 dep d
    [[ -n ${SEEN[$name]:-} ]] && return 0
    SEEN[$name]=1
    for dep in ${DEPS[$name]}; do
        d=$(basename "$dep")
        d=${d%%.ko*}
        visit "${d//-/_}"
    done
    ORDER+=("$name")
}
# virtio_pci and virtio_ring are built into Debian's kernel; take them when not.
for m in virtio virtio_ring virtio_pci "${MODULES[@]}"; do
    if [[ -n ${PATHOF[$m]:-} ]]; then
        visit "$m"
    elif ! grep -q "/${m}.ko" "$MODDIR/modules.builtin" 2>/dev/null; then
        [[ $m == virtio* ]] || fail "module $m is neither in modules.dep nor built in ($KVER)"
    fi
done

# 3. The initramfs tree (merged /usr, so no busybox applet shadows a real tool).
say "[3/4] assembling the initramfs tree ($((SECONDS - started)) s so far) ..."
STAGE=$OUT/stage
rm -rf "$STAGE"
mkdir -p "$STAGE"/{usr/bin,usr/sbin,usr/lib/x86_64-linux-gnu,usr/lib64,usr/lib/modules,etc,proc,sys,dev,tmp,run,root,var/tmp}
ln -s usr/bin "$STAGE/bin"
ln -s usr/sbin "$STAGE/sbin"
ln -s usr/lib "$STAGE/lib"
ln -s usr/lib64 "$STAGE/lib64"
chmod 1777 "$STAGE/tmp" "$STAGE/var/tmp"

: >"$STAGE/lib/modules/load.order"
for name in "${ORDER[@]}"; do
    src=$MODDIR/${PATHOF[$name]}
    dst=$STAGE/lib/modules/$name.ko
    case $src in
    *.ko.xz) xz -dc "$src" >"$dst" ;;
    *.ko.zst) zstd -qdc "$src" >"$dst" ;;
    *.ko.gz) gzip -dc "$src" >"$dst" ;;
    *) cp "$src" "$dst" ;;
    esac
    echo "$name" >>"$STAGE/lib/modules/load.order"
done
echo "$KVER" >"$STAGE/lib/modules/version"

# Copies a root path into the stage through its symlinked directories.
put() {
    local p=$1
    [[ -e $STAGE$p ]] && return 0
    mkdir -p "$(dirname "$STAGE$p")"
    cp -L "$RFS$p" "$STAGE$p"
}
is_elf() { [[ $(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ') == '177ELF' ]]; }

# The tools: every program of these packages, plus ip, rdma and ss of iproute2.
TOOLS=()
for pkg in ibverbs-utils perftest rdmacm-utils; do
    while IFS= read -r f; do
        [[ $f == */bin/* || $f == */sbin/* ]] || continue
        [[ -f $RFS$f && ! -L $RFS$f ]] && is_elf "$RFS$f" && TOOLS+=("$f")
    done < <(in_root dpkg -L "$pkg")
done
for t in ip rdma ss; do
    f=$(in_root sh -c "command -v $t") || fail "no $t in the root"
    TOOLS+=("$(in_root readlink -f "$f")")
done
PROVIDER=$(in_root sh -c 'ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so' | head -n 1)
[[ -n $PROVIDER ]] || fail "no librxe provider in ibverbs-providers"
LIBS=("$PROVIDER" "$(in_root readlink -f /usr/lib/x86_64-linux-gnu/libgcc_s.so.1)")
for lib in libibverbs.so.1 librdmacm.so.1; do
    LIBS+=("$(in_root readlink -f "/usr/lib/x86_64-linux-gnu/$lib")")
done

for f in "${TOOLS[@]}" "${LIBS[@]}"; do
    put "$f"
done
# Libraries keep their soname (cp -L above wrote the real file under the link's name
# for tools; for libraries found by readlink add the soname link).
for lib in libibverbs.so.1 librdmacm.so.1 libgcc_s.so.1; do
    p=/usr/lib/x86_64-linux-gnu/$lib
    [[ -e $STAGE$p ]] || put "$p"
done
# The ldd closure (in the root: its loader, its libraries).
for f in "${TOOLS[@]}" "${LIBS[@]}"; do
    while IFS= read -r dep; do
        put "$dep"
    done < <(in_root ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
done
mkdir -p "$STAGE/etc/libibverbs.d"
cp "$RFS/etc/libibverbs.d/rxe.driver" "$STAGE/etc/libibverbs.d/" || fail "no rxe.driver"
[[ -d $RFS/etc/iproute2 ]] && cp -r "$RFS/etc/iproute2" "$STAGE/etc/"
[[ -d $RFS/usr/share/iproute2 ]] && mkdir -p "$STAGE/usr/share" && cp -r "$RFS/usr/share/iproute2" "$STAGE/usr/share/"

# busybox: the shell and every applet that no real tool above provides.
cp "$RFS/bin/busybox" "$STAGE/usr/bin/busybox"
while IFS= read -r applet; do
    [[ -n $applet ]] || continue
    a=$(basename "$applet")
    [[ -e $STAGE/usr/bin/$a || -e $STAGE/usr/sbin/$a || -L $STAGE/usr/bin/$a ]] && continue
    ln -s busybox "$STAGE/usr/bin/$a"
done < <(in_root /bin/busybox --list)

cat >"$STAGE/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
EOF
cat >"$STAGE/etc/group" <<'EOF'
root:x:0:
EOF
cat >"$STAGE/etc/hosts" <<'EOF'
127.0.0.1 localhost
10.254.0.100 host
EOF
echo "hosts: files" >"$STAGE/etc/nsswitch.conf"
echo peer >"$STAGE/etc/hostname"

# Our C programs: compiled on the host (bookworm's gcc and libibverbs-dev,
# which `make deps-rdma-core` installs), linked only against libraries the
# stage already holds (libibverbs.so.1, libc).
if [[ ! -f /usr/include/infiniband/verbs.h ]] || ! command -v gcc >/dev/null; then
    say "installing gcc and libibverbs-dev (for ${C_PROGRAMS[*]}) ..."
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gcc libibverbs-dev; } \
        >>"$LOG" 2>&1 || fail "cannot install gcc and libibverbs-dev"
fi
for p in "${C_PROGRAMS[@]}"; do
    libs=()
    grep -q '<infiniband/verbs.h>' "$HERE/$p.c" && libs=(-libverbs)
    gcc -O2 -Wall -Wextra -Werror -o "$STAGE/usr/bin/$p" "$HERE/$p.c" "${libs[@]}" >>"$LOG" 2>&1 ||
        fail "cannot compile $p.c"
done

# Our kernel modules (if any for this peer): built on the host with its
# gcc-12 (the compiler Debian built the kernel with, which the headers'
# .kernelvariables name) against the headers of exactly the peer's kernel:
# linux-headers-$KVER, its -common and linux-kbuild packages at the image's
# version, downloaded (only those, not their compiler dependency) into the
# root's apt cache and extracted beside it. The amd64 headers' Makefile
# includes the -common one by its installed path; the extract's points at
# the extract (rewritten each build: the checkout may have moved).
if ((${#KMODULES[@]})); then
    KVERSION=${KDEB##*/}
    KVERSION=${KVERSION#*_}
    KVERSION=${KVERSION%%_*}
    KHDR=$RFS/opt/peer-headers-$KVER
    if [[ ! -f $KHDR/.done ]]; then
        say "downloading linux-headers-$KVER $KVERSION (for ${KMODULES[*]}) ..."
        mapfile -t HDEPS < <(in_root apt-cache depends "linux-headers-$KVER" |
            awk '$1 == "Depends:" && ($2 ~ /^linux-headers-.*-common$/ || $2 ~ /^linux-kbuild-/) { print $2 }')
        ((${#HDEPS[@]} == 2)) || fail "cannot tell linux-headers-$KVER's -common and kbuild packages (${HDEPS[*]})"
        HPKGS=()
        for pkg in "linux-headers-$KVER" "${HDEPS[@]}"; do HPKGS+=("$pkg=$KVERSION"); done
        in_root sh -c "cd /var/cache/apt/archives && apt-get download -q ${HPKGS[*]}" >>"$LOG" 2>&1 ||
            fail "cannot download ${HPKGS[*]} (when the mirror has moved on to a newer kernel, remove $RFS to start afresh)"
        $SUDO rm -rf "$KHDR"
        mkdir -p "$KHDR"
        for pkg in "linux-headers-$KVER" "${HDEPS[@]}"; do
            deb=$(ls "$RFS"/var/cache/apt/archives/"${pkg}"_"${KVERSION}"_*.deb 2>/dev/null | head -n 1)
            [[ -n $deb ]] || fail "no .deb of $pkg $KVERSION in the root's apt cache"
            dpkg-deb -x "$deb" "$KHDR" || fail "cannot extract $deb"
        done
        touch "$KHDR/.done"
    fi
    common=$(cd "$KHDR/usr/src" && ls -d linux-headers-*-common | head -n 1)
    [[ -n $common ]] || fail "no -common headers in $KHDR"
    printf 'include %s\n' "$KHDR/usr/src/$common/Makefile" >"$KHDR/usr/src/linux-headers-$KVER/Makefile"
    if ! command -v gcc-12 >/dev/null || ! command -v make >/dev/null; then
        say "installing gcc-12 and make (for ${KMODULES[*]}) ..."
        { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gcc-12 make; } \
            >>"$LOG" 2>&1 || fail "cannot install gcc-12 and make"
    fi
    KBUILD=$OUT/kbuild
    mkdir -p "$STAGE/usr/lib/modules/test"
    for m in "${KMODULES[@]}"; do
        rm -rf "$KBUILD"
        mkdir -p "$KBUILD"
        cp "$HERE/$m.c" "$KBUILD/"
        printf 'obj-m := %s.o\nccflags-y := -Werror\n' "$m" >"$KBUILD/Kbuild"
        make -s -C "$KHDR/usr/src/linux-headers-$KVER" M="$KBUILD" modules >>"$LOG" 2>&1 ||
            fail "cannot build $m.ko"
        # As Debian ships its modules: without debug information.
        strip --strip-debug -o "$STAGE/usr/lib/modules/test/$m.ko" "$KBUILD/$m.ko" || fail "cannot strip $m.ko"
    done
    rm -rf "$KBUILD"
fi

install -m 0755 "$HERE/init" "$STAGE/init"
if [[ $(id -u) -eq 0 ]]; then
    mknod -m 600 "$STAGE/dev/console" c 5 1
    mknod -m 666 "$STAGE/dev/null" c 1 3
fi

# 4. The outputs, written under temporary names and renamed last.
say "[4/4] writing the initramfs archive ($((SECONDS - started)) s so far) ..."
(cd "$STAGE" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$OUT/initramfs.cpio.tmp" ||
    fail "cpio failed"
cp "$KDIR/boot/vmlinuz-$KVER" "$OUT/vmlinuz.tmp"
mv "$OUT/vmlinuz.tmp" "$OUT/vmlinuz"
mv "$OUT/initramfs.cpio.tmp" "$OUT/initramfs.cpio"
echo "$KVER" >"$OUT/kernel-version"
echo "$INPUTS" >"$OUT/inputs"
$SUDO rm -rf "$KDIR" # 400 MB of modules; the .deb stays in the root's apt cache
say "built $OUT: kernel $KVER, initramfs $(($(stat -c %s "$OUT/initramfs.cpio") / 1048576)) MiB, ${#ORDER[@]} modules, $((SECONDS - started)) s"
