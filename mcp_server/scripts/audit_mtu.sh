#!/bin/sh
# A30, the path MTU from this node to a peer: a 9000-byte frame (8972 bytes of ICMP payload) and
# a 1500-byte one (1472), both with fragmentation forbidden.  $1 the peer's address
command -v ping >/dev/null 2>&1 || { echo "noping"; exit 0; }
for size in 8972 1472; do
  if ping -c 1 -W 2 -M "do" -s "$size" "$1" >/dev/null 2>&1; then printf 'size%s=ok\n' "$size"
  else printf 'size%s=fail\n' "$size"; fi
done
