#!/bin/sh
# Run a command where the system resolver answers from a given hosts file and the given addresses
# sit on loopback. Meant to run under `unshare -mn` (fresh network and mount namespaces), so the
# bind mount and the addresses vanish with the command and the machine's own /etc/hosts is untouched.
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
mount --bind "$hosts" /etc/hosts
exec "$@"
