#!/bin/sh
# verify_artifacts, packed pull: the detached packer (written to <job>/run.sh by verify_tar_start.sh).
# $1 the result root  $2 the job directory  $3 gnu | python
# Packs the listed files, in list order, into <job>/pack.tar with mtime 0, owner and group 0 and no
# user or group names, so the same files always give the same bytes; regular files only, never a
# directory's contents. Then hashes the tar once and writes pack_rc, sha256 and bytes to <job>/out.
echo $$ > "$2/pid"
cd "$1" || exit 1
j=$2
if [ "$3" = gnu ]; then
  tar --create --file="$j/pack.tar" --format=gnu --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    --no-recursion --hard-dereference --null --verbatim-files-from --files-from="$j/list" 2> "$j/err"
else
  python3 "$j/packer.py" pack "$j/pack.tar" < "$j/list" 2> "$j/err"
fi
pack_rc=$?
sum=
if [ -f "$j/pack.tar" ]; then
  if command -v sha256sum >/dev/null 2>&1; then sum=$(sha256sum < "$j/pack.tar")
  elif command -v openssl >/dev/null 2>&1; then sum=$(openssl dgst -sha256 -r < "$j/pack.tar")
  else sum=$(python3 "$j/packer.py" hash "$j/pack.tar")
  fi
fi
size=$(wc -c < "$j/pack.tar" 2>/dev/null)
printf 'pack_rc=%s\nsha256=%s\nbytes=%s\n' "$pack_rc" "${sum%% *}" "$((size + 0))" > "$j/out.tmp"
mv "$j/out.tmp" "$j/out"
