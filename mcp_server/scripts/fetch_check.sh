#!/bin/sh
# fetch_data, before anything starts: may it write where it was asked (the path policy, on the
# path as this box resolves it: dest, its .part and its completion marker), is it already fetched
# (the marker), how much room is there where it lands, and, for a URL, how big it is (a HEAD
# request, one literal URL, http(s) only; "" when the server does not say). Needs path_policy.sh.
# $1 dest (a file for a URL, a directory for a Hugging Face repo)  $2 url or ""
# $3... rgt_confine's roots and control trees
set -u
dest=$1 url=$2
shift 2
real=$(rgt_confine write "$dest" "$@")
printf 'confine=%s\n' "$real"
case $real in /*) ;; *) exit 0;; esac
marker=$(dirname -- "$real")/.rgt-fetch/$(basename -- "$real").done
for also in "part $real.part" "marker $marker" "marker $marker.tmp"; do
  c=$(rgt_confine write "${also#* }" "$@")
  case $c in /*) ;; *) printf 'confine=%s\nconfine_of=%s\n' "$c" "${also%% *}"; exit 0;; esac
done
if [ -f "$marker" ] && [ -e "$real" ]; then
  printf 'done=%s\n' "$(head -n 1 "$marker" | cut -d' ' -f1)"
  printf 'done_source=%s\n' "$(sed -n 's/^source //p' "$marker" | head -n 1)"
fi
d=$(dirname -- "$real")
mkdir -p -- "$d" || exit 3
df -P -B1 -- "$d" | awk 'NR == 2 { print "df_avail=" $4 }'
df -P -i -- "$d" | awk 'NR == 2 { print "df_ifree=" $4 }'
printf 'part=%s\n' "$(stat -c %s -- "$real.part" 2>/dev/null || echo 0)"
if [ -n "$url" ] && command -v curl >/dev/null 2>&1; then
  # The length of the last 2xx answer after redirects; a refusal (4xx) says nothing of the size.
  curl -sSIL --globoff --proto =https,http --proto-redir =https,http --max-redirs 10 --connect-timeout 15 \
    --max-time 20 -- "$url" 2>/dev/null | tr -d '\r' |
    awk '/^HTTP\// { ok = ($2 ~ /^2/); n = "" } ok && tolower($1) == "content-length:" { n = $2 }
         END { print "length=" n }'
fi
command -v hf >/dev/null 2>&1 && echo hf=1
command -v huggingface-cli >/dev/null 2>&1 && echo hfcli=1
exit 0
