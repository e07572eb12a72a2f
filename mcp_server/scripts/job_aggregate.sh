#!/usr/bin/env bash
# aggregate_results on the box: copy every finished cell of a sweep from scratch to
# <durable>/results/<name>/<cell>/, each file verified (job_sync.sh, prepended). A cell is a
# directory the cells glob matches under the source root; it is finished when it holds the
# marker file. Nothing is deleted and no differing file is replaced. A cell whose files are
# all copied gets a receipt (.rgt-cell.tsv: size, mtime, sha256, path), so a second call skips
# it without hashing again. Only regular files are copied: a symlink (a cell, a file, or a
# directory on the way to one) is never followed and never copied; it fails its cell. Prints
# `root=`, `dest=`, then per cell its refused symlinks and one line:
# link=<cell> TAB <symlink's path under the root> TAB <its target>
# cell=<cell> TAB outcome TAB files TAB bytes TAB detail
# $1 source root, its physical path (checked by the caller)  $2 cells glob  $3 marker
# $4 durable root  $5 name  $6 seconds after which no further file is started (the rest of the
# finished cells are `pending`)  $7.. globs of the files to copy inside a cell
set -u
src=$1 cells=$2 marker=$3 durable=$4 name=$5 budget=$6
shift 6
cd -- "$src" 2>/dev/null || { echo RGT-NOROOT; exit 0; }
here=$(pwd -P)
# The caller confined the root by its physical path: a symlink swapped in since is refused.
[ "$here" = "$src" ] || { echo RGT-MOVED; exit 0; }
durable=$(cd -- "$durable" 2>/dev/null && pwd -P) || { echo RGT-NODURABLE; exit 0; }
dest="$durable/results/$name"
printf 'root=%s\ndest=%s\n' "$here" "$dest"
shopt -s globstar nullglob dotglob
IFS=
tab=$(printf '\t')

flat() { printf '%s' "$1" | tr '\t\r\n' '   '; }
emit() { printf 'cell=%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(flat "$5")"; }

# first_link REL: sets `link` to the first component of REL (a path under the source root) that
# is a symlink, as a path under the root; returns 1 when none is. No subshell: it runs per file.
first_link() {
  local rest=$1 part
  link=""
  while [ -n "$rest" ]; do
    part=${rest%%/*}
    if [ "$part" = "$rest" ]; then rest=""; else rest=${rest#*/}; fi
    link+=${link:+/}$part
    [ -L "$here/$link" ] && return 0
  done
  return 1
}

# control REL: is REL (a path under the root, no symlink on the way) in a server control tree, by
# path_policy.sh's rule: a .rgt folder at any depth below the root, or the durable root's .rgt/ or
# code/ reached from a root outside them (a run's own work dir in .rgt/runs/ is data); or in
# <durable>/results/, where the copies land. Such a cell or file never matches.
control() {
  local t
  case /$1/ in */.rgt/*) return 0;; esac
  case $here/$1/ in "$durable/results/"*) return 0;; esac
  for t in "$durable/.rgt" "$durable/code"; do
    case $here/ in "$t"/*) continue;; esac
    case $here/$1/ in "$t"/*) return 0;; esac
  done
  return 1
}

# refuse CELL LINK: print the refused symlink's line (the caller fails the cell).
refuse() { printf 'link=%s\t%s\t%s\n' "$(flat "$1")" "$(flat "$2")" "$(flat "$(readlink -- "$here/$2")")"; }

# refused [SEP]: SEP, then what the cell's refused symlinks (`links`) mean; nothing when none.
refused() {
  [ ${#links[@]} -eq 0 ] || printf '%s%s symlink(s) refused, never followed or copied (a manifest holds regular files only; %s)' \
    "${1:-}" "${#links[@]}" "name the files to copy with \`files\`"
}

# cell_files CELL: the cell's regular files matching the globs ($@ of the script), in `files`
# (an array), relative to the cell; every matched symlink on the way (under the root) in
# `links`. Our own .rgt- files and anything in a control tree never count.
cell_files() {
  local p f; local -A seen=() seen_link=(); files=() links=()
  cd -- "$here/$1" || return 1
  for p in "${globs[@]}"; do for f in $p; do
    f=${f#./}
    case ${f##*/} in .rgt-*) continue;; esac
    control "$1/$f" && continue
    if first_link "$1/$f"; then
      [ -n "${seen_link[$link]:-}" ] || { seen_link[$link]=1; links+=("$link"); }
      continue
    fi
    [ -f "$f" ] || continue
    [ -n "${seen[$f]:-}" ] || { seen[$f]=1; files+=("$f"); }
  done; done
  cd -- "$here" || return 1
}

# signature CELL REL...: "size TAB mtime TAB path" per file, sorted by path as receipts are.
signature() { local c=$1 f; shift
  for f in "$@"; do stat -L --printf '%s\t%Y\t' -- "$c/$f"; printf '%s\n' "$f"; done | LC_ALL=C sort -t "$tab" -k3; }

aggregate_cell() {
  local cell=$1 f sm h line out=$dest/$1 n=0 bytes=0 receipt=""
  local -a why=()
  cell_files "$cell" || { emit "$cell" failed 0 0 "cannot read the cell"; return; }
  for f in ${links[@]+"${links[@]}"}; do refuse "$cell" "$f"; done
  [ ${#files[@]} -gt 0 ] || { emit "$cell" failed 0 0 "no regular file in the cell matches ${globs[*]}$(refused "; ")"; return; }
  if [ ${#links[@]} -eq 0 ] && [ -f "$out/.rgt-cell.tsv" ] && [ "$(signature "$cell" "${files[@]}")" = "$(cut -f1,2,4 "$out/.rgt-cell.tsv")" ]; then
    emit "$cell" already_durable "${#files[@]}" "$(awk -F "$tab" '{s += $1} END {print s + 0}' "$out/.rgt-cell.tsv")" \
      "unchanged since the last aggregation; its receipt lists every file"
    return
  fi
  for f in "${files[@]}"; do
    if [ "$SECONDS" -ge "$budget" ]; then
      emit "$cell" pending "$n" "$bytes" "$n of ${#files[@]} file(s) done when the call's time budget was spent: call again"
      return; fi
    sm=$(stat -L -c '%s %Y' -- "$cell/$f" 2>/dev/null)
    if [ -e "$out/$f" ]; then
      h=$(rgt_sha256 "$cell/$f")
      if [ -n "$h" ] && [ "$h" = "$(rgt_sha256 "$out/$f")" ]; then rgt_sha=$h rgt_bytes=${sm% *}
      else why+=("$f differs from the durable copy already there (nothing replaced): aggregate under a new name"); continue; fi
    elif ! rgt_copy_verified "$cell/$f" "$out/$f"; then why+=("$f: $rgt_why"); continue
    elif first_link "$cell/$f"; then  # made a symlink while it was copied: the copy goes too
      rm -f -- "$out/$f"; refuse "$cell" "$link"; links+=("$link"); continue; fi
    n=$((n + 1)) bytes=$((bytes + rgt_bytes))
    printf -v line '%s\t%s\t%s\t%s\n' "$rgt_bytes" "${sm#* }" "$rgt_sha" "$f"
    receipt+=$line
  done
  if [ ${#why[@]} -gt 0 ]; then
    emit "$cell" failed "$n" "$bytes" "${#why[@]} file(s) not made durable: $(rgt_join "${why[@]:0:3}")$(refused "; ")"; return
  elif [ ${#links[@]} -gt 0 ]; then emit "$cell" failed "$n" "$bytes" "$(refused)"; return; fi
  printf '%s' "$receipt" | LC_ALL=C sort -t "$tab" -k4 > "$out/.rgt-tmp.cell.$$" && mv -f -- "$out/.rgt-tmp.cell.$$" "$out/.rgt-cell.tsv"
  emit "$cell" copied "$n" "$bytes" "every file verified by size and sha256"
}

globs=("$@")
[ ${#globs[@]} -gt 0 ] || globs=("**")
for c in $cells; do
  [ -d "$c" ] || continue
  c=${c#./}; c=${c%/}
  control "$c" && continue
  case $c in *[[:cntrl:]]*) emit "$(printf '%s' "$c" | tr '[:cntrl:]' '?')" failed 0 0 "control character in the name"; continue;; esac
  if first_link "$c"; then
    refuse "$c" "$link"; emit "$c" failed 0 0 "symlink refused, never followed: a cell is a directory under the root"
  elif [ ! -e "$c/$marker" ]; then emit "$c" unfinished 0 0 "no $marker in the cell yet"
  elif [ "$SECONDS" -ge "$budget" ]; then emit "$c" pending 0 0 "the call's time budget was spent: call again"
  else aggregate_cell "$c"; fi
done
