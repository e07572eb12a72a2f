#!/bin/sh
# Library: the interpreters a launch and a login shell reach on a box, and which of them can
# import torch: one reading for A18 (audit_probe.sh) and prepare_box (box_prepare_read.sh), which
# decide from the same facts (system_checks.launch_python).

# rgt_timeout SECONDS CMD...: CMD under timeout(1) where the box has it.
rgt_timeout() { _rgt_s=$1; shift; if command -v timeout >/dev/null 2>&1; then timeout "$_rgt_s" "$@"; else "$@"; fi; }

# rgt_interp ROLE PATH: `ROLE=PATH|torch importable (1/0, found, not imported: fast)|which of
# python/python3 its directory holds`, or `ROLE=-` when PATH is no executable.
rgt_interp() {
  if [ -z "$2" ] || [ ! -x "$2" ]; then printf '%s=-\n' "$1"; return 0; fi
  _rgt_t=$(rgt_timeout 20 "$2" -c 'import importlib.util as u; print(int(u.find_spec("torch") is not None))' 2>/dev/null)
  _rgt_dir=${2%/*} _rgt_n=""
  for _rgt_b in python python3; do [ -x "$_rgt_dir/$_rgt_b" ] && _rgt_n="$_rgt_n $_rgt_b"; done
  printf '%s=%s|%s|%s\n' "$1" "$2" "${_rgt_t:-0}" "${_rgt_n# }"
}

# rgt_interps NAMED: the named interpreter, what a launch's (non-login) python and python3 reach,
# and a login shell's, where platforms put their stack on PATH (AutoDL's conda base).
rgt_interps() {
  rgt_interp named "$1"
  rgt_interp launch_python "$(command -v python)"
  rgt_interp launch_python3 "$(command -v python3)"
  _rgt_login=""
  if command -v bash >/dev/null 2>&1; then
    # shellcheck disable=SC2016  # expanded by the login shell, not this one
    _rgt_login=$(rgt_timeout 10 bash -lc 'printf "\nrgt_login=%s\n" "$(command -v python || command -v python3)"' \
      </dev/null 2>/dev/null | sed -n 's/^rgt_login=//p' | tail -n 1)
  fi
  rgt_interp login "$_rgt_login"
}
