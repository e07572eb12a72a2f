#!/bin/sh
# verify_artifacts, the detached hasher (written to <job>/run.sh by verify_hash_start.sh).
# $1 the result root  $2 the job directory  $3 python-hashlib | openssl | sha256sum
# $4 parallel workers  $5 the python3 to use
# Writes "<sha256>\t<bytes or ->\t<path>" lines to <job>/out.partial, then its status to <job>/rc.
cd "$1" || exit 1
j=$2
workers=$4
hash_with() {
  # Both tools print "<hex> <mark><path>"; turn that into "<hex>\t-\t<path>".
  tr '\n' '\0' < "$j/list" | xargs -0 -P "$workers" -n 8 "$@" | sed 's/^\([0-9a-f]\{64\}\) [ *]/\1\t-\t/'
}
hash_nofollow() {
  # As the Python hasher does: a file swapped for a symlink since the listing (it, or a parent
  # directory) is refused at open time. One file at a time: its parent is checked, then GNU dd
  # opens it with O_NOFOLLOW and the tool hashes what dd read. A refused file gets no line (the
  # pull then names it missing) and a "refused" line on stderr.
  top=$(pwd -P)
  while IFS= read -r f; do
    d=$(dirname -- "$f")
    case $d in .) want=$top ;; *) want=$top/${d#./} ;; esac
    if [ "$(cd -- "$d" 2>/dev/null && pwd -P)" != "$want" ]; then
      echo "refused $f: a parent directory is now a symlink" >&2; continue
    fi
    if [ -L "$f" ] || [ ! -f "$f" ]; then echo "refused $f: not a regular file at hash time" >&2; continue; fi
    rm -f "$j/dd.failed"
    h=$({ dd if="$f" iflag=nofollow bs=1M status=none 2>/dev/null || : > "$j/dd.failed"; } | "$@" | cut -c1-64)
    if [ -e "$j/dd.failed" ]; then echo "refused $f: cannot open without following a symlink" >&2; continue; fi
    printf '%s\t-\t%s\n' "$h" "$f"
  done < "$j/list"
}
hash_tool() {
  # GNU dd knows iflag=nofollow; a dd that does not (busybox) leaves the listing's check alone.
  if dd if=/dev/null iflag=nofollow status=none 2>/dev/null; then hash_nofollow "$@"; else hash_with "$@"; fi
}
{
  case $3 in
    python-hashlib) "$5" "$j/hasher.py" "$workers" < "$j/list" ;;
    openssl) hash_tool openssl dgst -sha256 -r ;;
    *) hash_tool sha256sum ;;
  esac
} > "$j/out.partial" 2> "$j/err"
echo $? > "$j/rc.tmp" && mv "$j/rc.tmp" "$j/rc"
