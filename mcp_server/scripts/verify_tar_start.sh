#!/bin/sh
# verify_artifacts, packed pull: make a job directory and start the packer detached.
# $1 the result root (physical path)  $2 the job id  $3 auto | gnu | python (which packer may be used)
# $4 the text of run.sh (verify_tar_run.sh)  $5 the text of packer.py
# stdin: the files to pack, relative to the root, NUL-separated, in the order they are packed.
# Prints dir=<job directory> and packer=<gnu | python>, or RGT-NODIR / RGT-NOPACKER.
r=$1
j="$r/.rgt-pull/pack-$2"
if ! mkdir -p "$j" 2>/dev/null; then
  # A read-only result root: pack under the box's temporary directory instead.
  j=$(mktemp -d "${TMPDIR:-/tmp}/rgt-pack-XXXXXX" 2>/dev/null) || { cat > /dev/null; echo RGT-NODIR; exit 0; }
fi
cat > "$j/list"
packer=
if [ "$3" != python ] && tar --sort=name --verbatim-files-from --hard-dereference --no-recursion --version >/dev/null 2>&1; then
  packer=gnu
elif [ "$3" != gnu ] && command -v python3 >/dev/null 2>&1; then
  packer=python
fi
if [ -z "$packer" ]; then
  rm -f "$j/list"; rmdir "$j"; echo RGT-NOPACKER; exit 0
fi
printf '%s' "$4" > "$j/run.sh"
printf '%s' "$5" > "$j/packer.py"
setsid -f sh "$j/run.sh" "$r" "$j" "$packer" >/dev/null 2>&1 </dev/null
printf 'dir=%s\npacker=%s\n' "$j" "$packer"
