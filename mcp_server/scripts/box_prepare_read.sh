#!/bin/sh
# prepare_box, the plan's facts (read-only): the box env file every launch sources, whether pip
# has an index configured, the proxy the profile's hook sets, whether tmux can be installed, the
# interpreters a launch and a login shell reach (and which can import torch), and conda's config.
# $1 durable root  $2 the profile's proxy hook ("" for none)  $3 the named interpreter ("" for
# none)  $4 the conda keys the mirror sets, space-separated. Needs box_interp.sh.
root=$1 hook=$2 named=$3 keys=$4
printf 'durable=%s\n' "$(cd "$root" 2>/dev/null && pwd -P)"
f="$root/.rgt/box.env"
if [ -f "$f" ]; then printf 'box_env=%s\n' "$(base64 -w0 < "$f")"; else echo "box_env=-"; fi
idx=""
for c in "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf" /etc/pip.conf "${PIP_CONFIG_FILE:-/nonexistent}"; do
  [ -f "$c" ] && grep -qE '^[[:space:]]*index-url' "$c" && idx=$c
done
[ -n "${PIP_INDEX_URL:-}" ] && idx=PIP_INDEX_URL
printf 'pip_index=%s\npip_conf=%s\n' "$idx" "$HOME/.config/pip/pip.conf"
[ -f "$HOME/.config/pip/pip.conf" ] && echo "pip_conf_exists=1"
rgt_interps "$named"  # box_interp.sh: the same reading as A18's
# conda: on PATH, from CONDA_EXE, or beside the named interpreter (a non-login shell often lacks it).
conda=$(command -v conda 2>/dev/null); case $conda in /*) ;; *) conda="" ;; esac
[ -z "$conda" ] && [ -x "${CONDA_EXE:-/nonexistent}" ] && conda=$CONDA_EXE
[ -z "$conda" ] && [ -n "$named" ] && [ -x "${named%/*}/conda" ] && conda=${named%/*}/conda
printf 'conda=%s\ncondarc=%s\n' "$conda" "$HOME/.condarc"
if [ -n "$conda" ]; then
  if [ -f "$HOME/.condarc" ]; then printf 'condarc_text=%s\n' "$(base64 -w0 < "$HOME/.condarc")"; else echo "condarc_text=-"; fi
  base=${conda%/*}; base=${base%/*}
  xdg=${XDG_CONFIG_HOME:-$HOME/.config}
  # conda's own search path for config files (docs: "Searching for .condarc"), $CONDARC last.
  for k in $keys; do
    for c in /etc/conda/.condarc /etc/conda/condarc /etc/conda/condarc.d/* /var/lib/conda/.condarc \
      /var/lib/conda/condarc /var/lib/conda/condarc.d/* "$base/.condarc" "$base/condarc" "$base/condarc.d/"* \
      "$xdg/conda/.condarc" "$xdg/conda/condarc" "$xdg/conda/condarc.d/"* "$HOME/.conda/.condarc" \
      "$HOME/.conda/condarc" "$HOME/.conda/condarc.d/"* "$HOME/.condarc" "${CONDARC:-/nonexistent}"; do
      [ -f "$c" ] && grep -q "^$k:" "$c" && { printf 'conda_set_%s=%s\n' "$k" "$c"; break; }
    done
  done
fi
# The proxy a job sees: after the profile's hook, as launches run it.
if [ -n "$hook" ]; then eval "$hook" >/dev/null 2>&1; fi
printf 'proxy=%s\nno_proxy=%s\n' "${https_proxy:-${http_proxy:-${HTTPS_PROXY:-${HTTP_PROXY:-}}}}" "${no_proxy:-${NO_PROXY:-}}"
printf 'tmux=%s\nuid=%s\napt=%s\n' "$(command -v tmux)" "$(id -u)" "$(command -v apt-get)"
