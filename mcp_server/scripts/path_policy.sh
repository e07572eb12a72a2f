#!/bin/sh
# Library: the path policy on the box (prepended to the scripts that need it; see
# mcp_server/paths/policy.py). Where a tool may read, write, delete or send is decided on the path
# as the box resolves it, every symlink followed, so nothing the box plants (a symlinked folder,
# a symlinked file) can steer a write outside the roots or into the server's own control files.
# job_tail.sh still has its own copy of the credential list; it should source this file instead.
#
# rgt_confine INTENT PATH ROOT...
#   INTENT  read | send: the whole path is resolved (a symlinked last part is followed);
#           write | delete: its folder is resolved and the last part must not be a symlink
#   ROOT    a folder the path must lie under (resolved too); "!/abs/dir": a control tree the path
#           must not lie in (resolved, and as written); "!name": a control folder name the path
#           must not pass through at any depth (as written and resolved)
# Prints one line: the resolved path; or "RGT-DENIED <reason>" (credential, startup-file,
# control <name>, symlink, dotdot, unresolvable, unprintable, intent); or "RGT-OUTSIDE".

# rgt_resolve PATH: absolute PATH with every symlink in it resolved; parts that do not exist yet
# are kept as written (GNU realpath -m). Without it: readlink -f of the deepest part that exists,
# a dangling link followed one hop at a time (at most 40), and "." or ".." left over is a failure.
rgt_resolve() {
  realpath -m -- "$1" 2>/dev/null && return 0
  _rgtp_head=$1 _rgtp_rest='' _rgtp_hops=0
  while :; do
    if [ -e "$_rgtp_head" ]; then
      _rgtp_head=$(readlink -f -- "$_rgtp_head") || return 1
      break
    elif [ -L "$_rgtp_head" ]; then
      _rgtp_hops=$((_rgtp_hops + 1))
      [ "$_rgtp_hops" -le 40 ] || return 1
      _rgtp_to=$(readlink -- "$_rgtp_head") || return 1
      case $_rgtp_to in /*) _rgtp_head=$_rgtp_to;; *) _rgtp_head=${_rgtp_head%/*}/$_rgtp_to;; esac
    else
      _rgtp_rest=/${_rgtp_head##*/}$_rgtp_rest
      _rgtp_head=${_rgtp_head%/*}
      [ -n "$_rgtp_head" ] || break
    fi
  done
  case ${_rgtp_head%/}$_rgtp_rest/ in */./*|*/../*) return 1;; esac
  printf '%s%s\n' "${_rgtp_head%/}" "$_rgtp_rest"
}

# rgt_in PATH TREE: is PATH the folder TREE or inside it?
rgt_in() { case $1 in "$2"|"$2"/*) return 0;; esac; return 1; }

rgt_confine() {
  _rgtp_intent=$1 _rgtp_path=$2
  shift 2
  case /$_rgtp_path/ in */../*|*/./*) echo 'RGT-DENIED dotdot'; return 0;; esac
  _rgtp_real=
  case $_rgtp_intent in
    read|send) _rgtp_real=$(rgt_resolve "$_rgtp_path") || _rgtp_real=;;
    write|delete)
      while :; do case $_rgtp_path in ?*/) _rgtp_path=${_rgtp_path%/};; *) break;; esac; done
      if [ -L "$_rgtp_path" ]; then echo 'RGT-DENIED symlink'; return 0; fi
      _rgtp_dir=$(rgt_resolve "$(dirname -- "$_rgtp_path")") &&
        _rgtp_real=${_rgtp_dir%/}/${_rgtp_path##*/};;
    *) echo 'RGT-DENIED intent'; return 0;;
  esac
  [ -n "$_rgtp_real" ] || { echo 'RGT-DENIED unresolvable'; return 0; }
  case $_rgtp_real in *"
"*) echo 'RGT-DENIED unprintable'; return 0;; esac
  case $_rgtp_real in
    */.ssh/*|*/.gnupg/*|*/.aws/*|*/.azure/*|*/.kube/*|*/.config/gcloud/*|*/.docker/config.json|*/.netrc|\
    */.git-credentials|*/.pgpass|*.pem|*.key|*/id_rsa*|*/id_dsa*|*/id_ecdsa*|*/id_ed25519*|/etc/shadow*|\
    /etc/gshadow*|/etc/sudoers*|/proc/*|/sys/*|/dev/*)
      echo 'RGT-DENIED credential'; return 0;;
  esac
  case $_rgtp_intent in write|delete)
    case $_rgtp_real in
      */.bashrc|*/.bash_profile|*/.bash_login|*/.bash_logout|*/.profile|*/.zshrc|*/.zshenv|*/.zprofile|\
      */.zlogin|*/.pam_environment|*/.config/pip/*|*/.pip/*|*/.condarc|*/.config/systemd/*|*/.config/autostart/*)
        echo 'RGT-DENIED startup-file'; return 0;;
    esac;;
  esac
  _rgtp_inside=
  for _rgtp_root in "$@"; do
    case $_rgtp_root in
      '!/'*)
        _rgtp_tree=${_rgtp_root#!}
        _rgtp_rr=$(rgt_resolve "$_rgtp_tree") || { echo 'RGT-DENIED unresolvable'; return 0; }
        if rgt_in "$_rgtp_real" "$_rgtp_rr" || rgt_in "$_rgtp_path" "$_rgtp_tree"; then
          printf 'RGT-DENIED control %s\n' "${_rgtp_tree##*/}"; return 0
        fi;;
      '!'*)
        case /$_rgtp_real/ in */"${_rgtp_root#!}"/*) printf 'RGT-DENIED control %s\n' "${_rgtp_root#!}"; return 0;; esac
        case /$_rgtp_path/ in */"${_rgtp_root#!}"/*) printf 'RGT-DENIED control %s\n' "${_rgtp_root#!}"; return 0;; esac;;
      *)
        _rgtp_rr=$(rgt_resolve "$_rgtp_root") || continue
        case $_rgtp_real in "${_rgtp_rr%/}"/*) _rgtp_inside=1;; esac;;
    esac
  done
  [ -n "$_rgtp_inside" ] || { echo 'RGT-OUTSIDE'; return 0; }
  printf '%s\n' "$_rgtp_real"
}
