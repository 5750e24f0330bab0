#!/bin/sh
# Install the NBD clients the store's tests drive (qemu-io, nbdinfo/nbdcopy, fio, nbdkit)
# and the browser the report test renders pages in (chromium) when one is missing and we
# are root on a Debian-like system. Never fails: without them those tests skip with a
# message.
missing=""
for tool in qemu-io nbdinfo fio nbdkit chromium; do
    command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-debs: missing$missing (not root or no apt-get): the store's client tests will skip" >&2
    exit 0
fi
echo "ensure-debs: missing$missing: apt-get install qemu-utils libnbd-bin fio nbdkit chromium" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q qemu-utils libnbd-bin fio nbdkit chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q qemu-utils libnbd-bin fio nbdkit chromium >/dev/null 2>&1; } \
    || echo "ensure-debs: apt-get failed: the store's client and browser tests will skip" >&2
exit 0
