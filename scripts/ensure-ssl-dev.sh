#!/bin/sh
# The build of `raidlab serve --tls-psk` (the `tls-psk` cargo feature) links OpenSSL and
# finds it with pkg-config. Install libssl-dev and pkg-config when they are missing and we
# are root on a Debian-like system. Never fails: without them the Makefile builds without
# the feature, and `--tls-psk` then says the build lacks it.
pkg-config --exists openssl 2>/dev/null && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-ssl-dev: no OpenSSL development files (not root or no apt-get): building without TLS-PSK" >&2
    exit 0
fi
echo "ensure-ssl-dev: apt-get install libssl-dev pkg-config" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q libssl-dev pkg-config >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libssl-dev pkg-config >/dev/null 2>&1; } \
    || echo "ensure-ssl-dev: apt-get failed: building without TLS-PSK" >&2
exit 0
