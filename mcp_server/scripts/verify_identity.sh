#!/bin/sh
# verify_artifacts: which machine is this? key=value lines, read on the box itself (shell builtins
# only: it runs beside every listing). RGT_MACHINE_ID set on the box replaces /etc/machine-id (for
# containers cloned from one image); the source is printed so a record shows which one was used.
if [ -n "${RGT_MACHINE_ID:-}" ]; then
  printf 'machine_id=%s\nmachine_id_source=RGT_MACHINE_ID\n' "$RGT_MACHINE_ID"
else
  for f in /etc/machine-id /var/lib/dbus/machine-id; do
    if [ -s "$f" ] && read -r id < "$f"; then
      printf 'machine_id=%s\nmachine_id_source=%s\n' "$id" "$f"
      break
    fi
  done
fi
if [ -r /proc/sys/kernel/hostname ] && read -r name < /proc/sys/kernel/hostname; then
  printf 'hostname=%s\n' "$name"
else
  printf 'hostname=%s\n' "$(uname -n)"
fi
# The box's own SSH host key (the public half): the server turns it into its SHA256 fingerprint.
for t in ed25519 ecdsa rsa; do
  f=/etc/ssh/ssh_host_${t}_key.pub
  if [ -r "$f" ] && read -r _type blob _rest < "$f"; then
    printf 'host_key_blob=%s\n' "$blob"
    break
  fi
done
exit 0
