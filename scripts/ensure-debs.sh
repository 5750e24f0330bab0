#!/bin/sh
# Install the NBD clients the store's tests drive (qemu-io, nbdinfo/nbdcopy/nbdfuse, fio,
# nbdkit, and ip from iproute2 for the emulated hosts of remote members), the file-system
# tools of its file-system tests (mkfs.ext4/e2fsck, mkfs.xfs/xfs_repair, fuse3) and the
# browser the report test renders pages in (chromium) when one is missing and we are root
# on a Debian-like system. Never fails: without them those tests skip with a message.
pkgs="qemu-utils libnbd-bin fio nbdkit iproute2 chromium fuse3 e2fsprogs xfsprogs"
missing=""
for tool in qemu-io nbdinfo nbdfuse fio nbdkit ip chromium fusermount3 mkfs.ext4 e2fsck mkfs.xfs xfs_repair; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || [ -x "/sbin/$tool" ] || missing="$missing $tool"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-debs: missing$missing (not root or no apt-get): the store's client and file-system tests will skip" >&2
    exit 0
fi
echo "ensure-debs: missing$missing: apt-get install $pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
apt-get install -y -q $pkgs >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $pkgs >/dev/null 2>&1; } \
    || echo "ensure-debs: apt-get failed: the store's client, file-system and browser tests will skip" >&2
exit 0
