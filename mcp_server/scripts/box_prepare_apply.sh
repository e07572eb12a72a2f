#!/bin/sh
# prepare_box, the confirmed changes, each written atomically (tmp + rename): only what the
# plan listed. $1 durable root  $2 box.env content ("" leaves it)  $3 pip.conf path  $4 its content
# ("" leaves it; never replaces an existing file)  $5 1 to install tmux with apt-get  $6 the
# .condarc path  $7 its whole new content: the old text plus the missing mirror keys ("" leaves it)
set -u
root=$1 env=$2 pipconf=$3 pip=$4 tmux=$5 condarc=$6 conda=$7
if [ -n "$env" ]; then
  mkdir -p "$root/.rgt" && printf '%s' "$env" > "$root/.rgt/box.env.tmp" && mv -f "$root/.rgt/box.env.tmp" "$root/.rgt/box.env" \
    && echo "done=box.env" || echo "failed=box.env"
fi
if [ -n "$pip" ]; then
  if [ -e "$pipconf" ]; then echo "failed=pip.conf exists now"
  else mkdir -p "$(dirname "$pipconf")" && printf '%s' "$pip" > "$pipconf.tmp" && mv -f "$pipconf.tmp" "$pipconf" \
    && echo "done=pip.conf" || echo "failed=pip.conf"; fi
fi
if [ -n "$conda" ]; then
  printf '%s' "$conda" > "$condarc.tmp" && mv -f "$condarc.tmp" "$condarc" && echo "done=.condarc" || echo "failed=.condarc"
fi
if [ "$tmux" = 1 ]; then
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null 2>&1; then echo "done=tmux"
  else echo "failed=tmux (apt-get install tmux)"; fi
fi
exit 0
