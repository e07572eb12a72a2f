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
{
  case $3 in
    python-hashlib) "$5" "$j/hasher.py" "$workers" < "$j/list" ;;
    openssl) hash_with openssl dgst -sha256 -r ;;
    *) hash_with sha256sum ;;
  esac
} > "$j/out.partial" 2> "$j/err"
echo $? > "$j/rc.tmp" && mv "$j/rc.tmp" "$j/rc"
