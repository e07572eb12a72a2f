#!/bin/sh
# fetch_data, before anything starts: is it already fetched (the completion marker), how much
# room is there where it lands, and, for a URL, how big it is (a HEAD request; "" when the server
# does not say).  $1 dest (a file for a URL, a directory for a Hugging Face repo)  $2 url or ""
set -u
dest=$1 url=$2
marker=$(dirname -- "$dest")/.rgt-fetch/$(basename -- "$dest").done
if [ -f "$marker" ] && [ -e "$dest" ]; then
  printf 'done=%s\n' "$(head -n 1 "$marker" | cut -d' ' -f1)"
  printf 'done_source=%s\n' "$(sed -n 's/^source //p' "$marker" | head -n 1)"
fi
d=$(dirname -- "$dest")
mkdir -p -- "$d" || exit 3
df -P -B1 -- "$d" | awk 'NR == 2 { print "df_avail=" $4 }'
df -P -i -- "$d" | awk 'NR == 2 { print "df_ifree=" $4 }'
printf 'part=%s\n' "$(stat -c %s -- "$dest.part" 2>/dev/null || echo 0)"
if [ -n "$url" ] && command -v curl >/dev/null 2>&1; then
  curl -sSIL --connect-timeout 15 --max-time 20 -- "$url" 2>/dev/null | tr -d '\r' |
    awk 'tolower($1) == "content-length:" { n = $2 } END { print "length=" n }'
fi
command -v hf >/dev/null 2>&1 && echo hf=1
command -v huggingface-cli >/dev/null 2>&1 && echo hfcli=1
exit 0
