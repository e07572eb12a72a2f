#!/bin/sh
# prepare_box, the plan's facts (read-only): the box env file every launch sources, whether pip
# has an index configured, the proxy the profile's hook sets, and whether tmux can be installed.
# $1 durable root  $2 the profile's proxy hook ("" for none)
root=$1 hook=$2
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
# The proxy a job sees: after the profile's hook, as launches run it.
if [ -n "$hook" ]; then eval "$hook" >/dev/null 2>&1; fi
printf 'proxy=%s\nno_proxy=%s\n' "${https_proxy:-${http_proxy:-${HTTPS_PROXY:-${HTTP_PROXY:-}}}}" "${no_proxy:-${NO_PROXY:-}}"
printf 'tmux=%s\nuid=%s\napt=%s\n' "$(command -v tmux)" "$(id -u)" "$(command -v apt-get)"
