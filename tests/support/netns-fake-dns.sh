#!/bin/sh
# Run a command where the system resolver answers from a given hosts file and the given addresses
# sit on loopback. Meant to run under `unshare -mn` (fresh network and mount namespaces), so the
# bind mount and the addresses vanish with the command and the machine's own /etc/hosts is untouched.
# With RGT_TEST_TUN_CAPTURE=ADDRESS:PORT, TCP to that port of that (loopback) address is routed into a
# TUN device nothing reads, as a Clash/Mihomo TUN mode captures a route (policy routing before the
# local table); a socket bound to `lo` still reaches it, and /sys is remounted so the TUN is visible.
# Usage: netns-fake-dns.sh HOSTS_FILE ADDRESS[,ADDRESS...] COMMAND [ARG...]
set -eu
hosts=$1
addresses=$2
shift 2
ip link set lo up
old_ifs=$IFS
IFS=,
for address in $addresses; do
    ip addr add "$address/32" dev lo
done
IFS=$old_ifs
if [ -n "${RGT_TEST_TUN_CAPTURE:-}" ]; then
    ip tuntap add dev tun7 mode tun
    ip link set tun7 up
    ip route add default dev tun7 table 7
    ip rule add to "${RGT_TEST_TUN_CAPTURE%:*}" ipproto tcp dport "${RGT_TEST_TUN_CAPTURE##*:}" lookup 7 pref 100
    ip rule add lookup local pref 200
    ip rule del pref 0
    mount -t sysfs sysfs /sys
fi
mount --bind "$hosts" /etc/hosts
exec "$@"
