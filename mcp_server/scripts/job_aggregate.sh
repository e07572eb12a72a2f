#!/usr/bin/env bash
# aggregate_results on the box: copy every finished cell of a sweep from scratch to
# <durable>/results/<name>/<cell>/, each file verified (job_sync.sh, prepended). A cell is a
# directory the cells glob matches under the source root; it is finished when it holds the
# marker file. Nothing is deleted and no differing file is replaced. A cell whose files are
# all copied gets a receipt (.rgt-cell.tsv: size, mtime, sha256, path), so a second call skips
# it without hashing again. Prints `root=`, `dest=`, then one line per cell:
# cell=<cell> TAB outcome TAB files TAB bytes TAB detail
# $1 source root  $2 cells glob  $3 marker  $4 durable root  $5 name  $6 seconds after which no
# further file is started (the rest of the finished cells are `pending`)  $7.. globs of the
# files to copy inside a cell
set -u
src=$1 cells=$2 marker=$3 durable=$4 name=$5 budget=$6
shift 6
cd -- "$src" 2>/dev/null || { echo RGT-NOROOT; exit 0; }
here=$(pwd -P)
durable=$(cd -- "$durable" 2>/dev/null && pwd -P) || { echo RGT-NODURABLE; exit 0; }
dest="$durable/results/$name"
printf 'root=%s\ndest=%s\n' "$here" "$dest"
shopt -s globstar nullglob dotglob
IFS=
tab=$(printf '\t')

emit() { printf 'cell=%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$(printf '%s' "$5" | tr '\t\r\n' '   ')"; }

# cell_files CELL: the cell's files matching the globs ($@ of the script), one per line in
# `files` (an array), relative to the cell; our own .rgt- files never count.
cell_files() {
  local p f; local -A seen=(); files=()
  cd -- "$here/$1" || return 1
  for p in "${globs[@]}"; do for f in $p; do
    [ -f "$f" ] || continue
    f=${f#./}
    case ${f##*/} in .rgt-*) continue;; esac
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
  [ ${#files[@]} -gt 0 ] || { emit "$cell" failed 0 0 "no file in the cell matches ${globs[*]}"; return; }
  if [ -f "$out/.rgt-cell.tsv" ] && [ "$(signature "$cell" "${files[@]}")" = "$(cut -f1,2,4 "$out/.rgt-cell.tsv")" ]; then
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
    elif ! rgt_copy_verified "$cell/$f" "$out/$f"; then why+=("$f: $rgt_why"); continue; fi
    n=$((n + 1)) bytes=$((bytes + rgt_bytes))
    printf -v line '%s\t%s\t%s\t%s\n' "$rgt_bytes" "${sm#* }" "$rgt_sha" "$f"
    receipt+=$line
  done
  if [ ${#why[@]} -gt 0 ]; then
    emit "$cell" failed "$n" "$bytes" "${#why[@]} file(s) not made durable: $(rgt_join "${why[@]:0:3}")"; return; fi
  printf '%s' "$receipt" | LC_ALL=C sort -t "$tab" -k4 > "$out/.rgt-tmp.cell.$$" && mv -f -- "$out/.rgt-tmp.cell.$$" "$out/.rgt-cell.tsv"
  emit "$cell" copied "$n" "$bytes" "every file verified by size and sha256"
}

globs=("$@")
[ ${#globs[@]} -gt 0 ] || globs=("**")
for c in $cells; do
  [ -d "$c" ] || continue
  c=${c#./}; c=${c%/}
  case "$here/$c/" in "$durable/results/"*|"$durable/.rgt/"*) continue;; esac
  case $c in *[[:cntrl:]]*) emit "$(printf '%s' "$c" | tr '[:cntrl:]' '?')" failed 0 0 "control character in the name"; continue;; esac
  if [ ! -e "$c/$marker" ]; then emit "$c" unfinished 0 0 "no $marker in the cell yet"
  elif [ "$SECONDS" -ge "$budget" ]; then emit "$c" pending 0 0 "the call's time budget was spent: call again"
  else aggregate_cell "$c"; fi
done
