#!/bin/sh
# prepare_box, the plan's facts (read-only): the box env file every launch sources, whether pip
# has an index configured, the proxy the profile's hook sets, whether tmux can be installed, the
# interpreters a launch and a login shell reach (and which can import torch), and conda's config.
# $1 durable root  $2 the profile's proxy hook ("" for none)  $3 the named interpreter ("" for
# none)  $4 the conda keys the mirror sets, space-separated
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
# interp ROLE PATH: the interpreter, whether it can import torch (found, not imported: fast) and
# which of python/python3 its directory holds. A launch runs in this non-login shell's PATH.
interp() {
  if [ -z "$2" ] || [ ! -x "$2" ]; then printf '%s=-\n' "$1"; return 0; fi
  t=$(timeout 20 "$2" -c 'import importlib.util as u; print(int(u.find_spec("torch") is not None))' 2>/dev/null)
  d=${2%/*} n=""
  for b in python python3; do [ -x "$d/$b" ] && n="$n $b"; done
  printf '%s=%s|%s|%s\n' "$1" "$2" "${t:-0}" "${n# }"
}
interp named "$named"
interp launch_python "$(command -v python)"
interp launch_python3 "$(command -v python3)"
# A login shell is where platforms put their stack on PATH (AutoDL's conda base, Matpool's env).
login=""
if command -v bash >/dev/null 2>&1; then
  # shellcheck disable=SC2016  # expanded by the login shell, not this one
  login=$(timeout 10 bash -lc 'printf "\nrgt_login=%s\n" "$(command -v python || command -v python3)"' </dev/null 2>/dev/null \
    | sed -n 's/^rgt_login=//p' | tail -n 1)
fi
interp login "$login"
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
