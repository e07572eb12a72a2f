#!/bin/sh
# Library: the path policy on the box (prepended to every script that reads, writes, deletes or
# sends a path a caller named; see mcp_server/paths/policy.py). It decides on the path as the box
# resolves it, every symlink followed, so nothing the box plants (a symlinked folder, a symlinked
# file) can steer a tool outside its roots, into the server's own control files or onto the deny
# list. The deny list is filled in from mcp_server/paths/deny.py when the library is loaded (the
# RGT_DENY_* and RGT_STARTUP_* words below): one list for the box and for this machine.
#
# rgt_check INTENT PATH WORD...   sets RGT_REAL (the resolved path) and RGT_UNDER (which root,
#   1-based, holds it) and returns 0; or sets RGT_REFUSAL and returns 1. rgt_confine prints
#   RGT_REAL or RGT_REFUSAL instead.
#   INTENT  read | send: the whole path is resolved (a symlinked last part is followed, ".."
#           taken after the symlinks before it); write | delete: no "." or ".." part, its folder
#           is resolved and the last part must not be a symlink
#   WORD    "/abs": a root the path must lie under (read and send may name the root itself);
#           "!/abs": a control tree the path must not lie in (resolved, and as written);
#           "!name": a control folder name the path must not pass through at any depth;
#           "%/abs": the server's own state folder ($RGT_HOME, when the box is this machine);
#           "+/abs": a runs folder (<durable>/.rgt/runs): each run's own work dir in it is data.
#   A root that itself lies in a control tree or the state folder opens exactly that part of it.
# Refusals: "RGT-DENIED <reason>" (credential, startup-file, control <name>, state, symlink, dotdot,
# unresolvable, unprintable, intent) or "RGT-OUTSIDE".

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
rgt_in() { case $1 in "$2"|"${2%/}"/*) return 0;; esac; return 1; }

# rgt_denied PATH: is PATH on the deny list (by the whole path, or by its last part's name)?
rgt_denied() {
  case $1 in RGT_DENY_PATHS) return 0;; esac
  case ${1##*/} in RGT_DENY_NAMES) return 0;; esac
  return 1
}

# rgt_startup PATH: is PATH a shell or tool start-up file (never written or deleted)?
rgt_startup() {
  case $1 in RGT_STARTUP_PATHS) return 0;; esac
  case ${1##*/} in RGT_STARTUP_NAMES) return 0;; esac
  return 1
}

# rgt_words TARGET WORD...: resolve TARGET and the folder of every word in one realpath call:
# TARGET in _rgtp_r0, word K's folder in _rgtp_rK, "" when it could not be resolved ("!name" words
# have none). Without GNU realpath, or when it fails on one of them, each is resolved on its own.
rgt_words() {
  _rgtp_tg=$1
  shift
  _rgtp_n=$#
  for _rgtp_w in "$@"; do
    case $_rgtp_w in '!/'*|'%/'*|'+/'*) _rgtp_w=${_rgtp_w#?};; /*) ;; *) _rgtp_w=/;; esac
    set -- "$@" "$_rgtp_w"
  done
  shift "$_rgtp_n"
  set -- "$_rgtp_tg" "$@"
  _rgtp_i=-1
  if _rgtp_all=$(realpath -m -- "$@" 2>/dev/null); then
    while IFS= read -r _rgtp_line; do
      _rgtp_i=$((_rgtp_i + 1))
      eval "_rgtp_r$_rgtp_i=\$_rgtp_line"
    done <<EOF
$_rgtp_all
EOF
  fi
  [ "$_rgtp_i" -eq $(($# - 1)) ] && return 0
  _rgtp_i=-1
  for _rgtp_w in "$@"; do
    _rgtp_i=$((_rgtp_i + 1))
    _rgtp_line=$(rgt_resolve "$_rgtp_w") || _rgtp_line=
    eval "_rgtp_r$_rgtp_i=\$_rgtp_line"
  done
}

# rgt_word K: word K's resolved folder (from rgt_words), without a trailing slash, in _rgtp_rr;
# returns 1 when it has none.
rgt_word() {
  eval "_rgtp_rr=\${_rgtp_r$1-}"
  [ -n "$_rgtp_rr" ] || return 1
  _rgtp_rr=${_rgtp_rr%/}
}

# rgt_hits WORD TREE REAL WRITTEN: does the control word WORD ("!/abs", "!name" or "%/abs"), whose
# resolved tree is TREE, cover REAL (resolved) or WRITTEN (as given)? 0 yes, 1 no, 2 its tree
# could not be resolved.
rgt_hits() {
  case $1 in
    '!/'*|'%/'*)
      [ -n "$2" ] || return 2
      rgt_in "$3" "$2" || rgt_in "$4" "${1#?}";;
    '!'*) case /$3/ in */"${1#!}"/*) return 0;; esac
          case /$4/ in */"${1#!}"/*) return 0;; esac
          return 1;;
    *) return 1;;
  esac
}

rgt_check() {
  _rgtp_intent=$1 _rgtp_path=$2
  shift 2
  RGT_REAL='' RGT_UNDER='' RGT_REFUSAL=''
  _rgtp_real=
  # What is resolved: the whole path (read, send), or its folder (write, delete); with the words.
  case $_rgtp_intent in
    read|send) rgt_words "$_rgtp_path" "$@"; _rgtp_real=$_rgtp_r0;;
    write|delete)
      case /$_rgtp_path/ in */../*|*/./*) RGT_REFUSAL='RGT-DENIED dotdot'; return 1;; esac
      while :; do case $_rgtp_path in ?*/) _rgtp_path=${_rgtp_path%/};; *) break;; esac; done
      if [ -L "$_rgtp_path" ]; then RGT_REFUSAL='RGT-DENIED symlink'; return 1; fi
      case $_rgtp_path in */*) _rgtp_dir=${_rgtp_path%/*}; _rgtp_dir=${_rgtp_dir:-/};; *) _rgtp_dir=.;; esac
      rgt_words "$_rgtp_dir" "$@"
      [ -z "$_rgtp_r0" ] || _rgtp_real=${_rgtp_r0%/}/${_rgtp_path##*/};;
    *) RGT_REFUSAL='RGT-DENIED intent'; return 1;;
  esac
  [ -n "$_rgtp_real" ] || { RGT_REFUSAL='RGT-DENIED unresolvable'; return 1; }
  case $_rgtp_real in *"
"*) RGT_REFUSAL='RGT-DENIED unprintable'; return 1;; esac
  if rgt_denied "$_rgtp_real" || rgt_denied "$_rgtp_path"; then RGT_REFUSAL='RGT-DENIED credential'; return 1; fi
  case $_rgtp_intent in write|delete)
    if rgt_startup "$_rgtp_real" || rgt_startup "$_rgtp_path"; then
      RGT_REFUSAL='RGT-DENIED startup-file'; return 1
    fi;;
  esac
  # The roots that hold the path (resolved, one per line) and the first one's number.
  _rgtp_holders='' _rgtp_n=0 _rgtp_k=0
  for _rgtp_w in "$@"; do
    _rgtp_k=$((_rgtp_k + 1))
    case $_rgtp_w in [!/]*) continue;; esac
    _rgtp_n=$((_rgtp_n + 1))
    rgt_word "$_rgtp_k" || continue
    case $_rgtp_real in
      "$_rgtp_rr"/*) ;;
      "$_rgtp_rr") case $_rgtp_intent in read|send) ;; *) continue;; esac;;
      *) continue;;
    esac
    [ -n "$RGT_UNDER" ] || RGT_UNDER=$_rgtp_n
    _rgtp_holders="$_rgtp_holders$_rgtp_rr
"
  done
  # A run's own work dir in a "+" runs folder holds the path too: a root of its own.
  _rgtp_k=0
  for _rgtp_w in "$@"; do
    _rgtp_k=$((_rgtp_k + 1))
    case $_rgtp_w in '+/'*) ;; *) continue;; esac
    rgt_word "$_rgtp_k" || continue
    case $_rgtp_real in "$_rgtp_rr"/?*/work|"$_rgtp_rr"/?*/work/*) ;; *) continue;; esac
    _rgtp_t=${_rgtp_real#"$_rgtp_rr"/}
    _rgtp_id=${_rgtp_t%%/*}
    case ${_rgtp_t#"$_rgtp_id"/} in work|work/*) ;; *) continue;; esac
    _rgtp_holders="$_rgtp_holders$_rgtp_rr/$_rgtp_id/work
"
  done
  _rgtp_k=0
  for _rgtp_w in "$@"; do
    _rgtp_k=$((_rgtp_k + 1))
    case $_rgtp_w in '!'*|'%/'*) ;; *) continue;; esac
    _rgtp_tree=
    case $_rgtp_w in '!/'*|'%/'*) rgt_word "$_rgtp_k" && _rgtp_tree=$_rgtp_rr;; esac
    _rgtp_rc=0
    rgt_hits "$_rgtp_w" "$_rgtp_tree" "$_rgtp_real" "$_rgtp_path" || _rgtp_rc=$?
    case $_rgtp_rc in 1) continue;; 2) RGT_REFUSAL='RGT-DENIED unresolvable'; return 1;; esac
    _rgtp_open=
    while IFS= read -r _rgtp_h; do
      [ -n "$_rgtp_h" ] && rgt_hits "$_rgtp_w" "$_rgtp_tree" "$_rgtp_h" "$_rgtp_h" && _rgtp_open=1
    done <<EOF
$_rgtp_holders
EOF
    [ -z "$_rgtp_open" ] || continue
    case $_rgtp_w in
      '%/'*) RGT_REFUSAL='RGT-DENIED state';;
      '!/'*) _rgtp_t=${_rgtp_w#!}; RGT_REFUSAL="RGT-DENIED control ${_rgtp_t##*/}";;
      *) RGT_REFUSAL="RGT-DENIED control ${_rgtp_w#!}";;
    esac
    return 1
  done
  [ -n "$RGT_UNDER" ] || { RGT_REFUSAL='RGT-OUTSIDE'; return 1; }
  RGT_REAL=$_rgtp_real
  return 0
}

rgt_confine() {
  if rgt_check "$@"; then printf '%s\n' "$RGT_REAL"; else printf '%s\n' "$RGT_REFUSAL"; fi
}
