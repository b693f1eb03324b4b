#!/usr/bin/env bash
# Installs QEMU for `make run` and the tests, once (idempotent, quiet).
#
# On Debian 12 it comes from bookworm-backports (QEMU 10): bookworm's own 7.2
# has no igb (82576) model, and 10's TCG copies guest memory faster. The
# backports entry is derived from this machine's own source for bookworm
# (same URIs, suite bookworm-backports), so no mirror is named here. Elsewhere
# the distribution's QEMU is taken as it is; the igb tests then say they skip.
set -euo pipefail
SUDO=${SUDO-}

has_igb() { qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"'; }

if command -v qemu-system-x86_64 >/dev/null && has_igb; then exit 0; fi

codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
if [[ $codename != bookworm ]]; then
    command -v qemu-system-x86_64 >/dev/null && exit 0
    echo "installing qemu-system-x86 ..."
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-system-x86 >/dev/null
    exit 0
fi

# The URI of bookworm's main suite, from a deb822 .sources file or a
# one-line sources.list entry.
bookworm_uri() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -e $f ]] || continue
        awk 'BEGIN { RS = ""; FS = "\n" }
             {
                 uri = ""; suite = 0
                 for (i = 1; i <= NF; i++) {
                     if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uri = a[2] }
                     if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) suite = 1
                 }
                 if (suite && uri != "") { print uri; exit }
             }' "$f"
    done | head -n 1
    awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true
}

list=/etc/apt/sources.list.d/bookworm-backports.sources
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    uri=$(bookworm_uri | head -n 1)
    if [[ -z $uri ]]; then
        echo "qemu: no apt source for bookworm on this machine to derive bookworm-backports from" >&2
        exit 1
    fi
    echo "enabling bookworm-backports ($uri) for QEMU 10 ..."
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" |
        $SUDO tee "$list" >/dev/null
fi
echo "installing qemu-system-x86 from bookworm-backports ..."
$SUDO apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports qemu-system-x86 >/dev/null
has_igb || { echo "qemu: bookworm-backports' QEMU has no igb model" >&2; exit 1; }
