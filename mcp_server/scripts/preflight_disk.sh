#!/bin/sh
# preflight's budget target: free bytes and inodes of a box's durable root, as df reports them
# (its nearest existing folder when the root is not made yet). `ok=1` last: the reader trusts
# the numbers only when df answered for both.
# $1 durable root
p=$1
while [ ! -d "$p" ] && [ "$p" != / ] && [ -n "$p" ]; do p=${p%/*}; [ -n "$p" ] || p=/; done
b=$(df -P -B1 -- "$p" 2>/dev/null | awk 'NR == 2 { print $2 " " $4 }') || b=
i=$(df -P -i -- "$p" 2>/dev/null | awk 'NR == 2 { print $2 " " $4 }') || i=
printf 'at=%s\nbytes=%s\ninodes=%s\n' "$p" "$b" "$i"
[ -n "$b" ] && [ -n "$i" ] && echo ok=1
