#!/bin/sh
# A30, the facts of one node of a multi-node job: NVSwitch fabric state and the fabric manager
# against the driver, the node's address and its network interfaces with their MTU.
printf 'addr=%s\n' "$(hostname -I 2>/dev/null | cut -d' ' -f1)"
printf 'host=%s\n' "$(hostname)"
if command -v nvidia-smi >/dev/null 2>&1; then
  printf 'driver=%s\n' "$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  # Per GPU, its Fabric block's State, Status and Health Summary (absent on older drivers).
  timeout 20 nvidia-smi -q 2>/dev/null | awk '
    function out() { if (in_f) printf "fabric=%s|%s|%s\n", st, ss, sm; in_f = 0 }
    /^ *Fabric *$/ { out(); in_f = 1; ind = index($0, "F"); st = ss = sm = ""; next }
    in_f && match($0, /[^ ]/) <= ind { out() }
    in_f { split($0, kv, " : "); k = kv[1]; gsub(/^ +| +$/, "", k); v = kv[2]; gsub(/^ +| +$/, "", v)
           if (k == "State") st = v; else if (k == "Status") ss = v; else if (k == "Summary") sm = v }
    END { out() }' | head -n 64
fi
if command -v nv-fabricmanager >/dev/null 2>&1; then
  printf 'fm_version=%s\n' "$(nv-fabricmanager --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n 1)"
  printf 'fm_active=%s\n' "$(systemctl is-active nvidia-fabricmanager 2>/dev/null)"
fi
ip -o link 2>/dev/null | awk -F': ' '$3 ~ /UP/ && $2 != "lo" { split($3, w, " "); for (i = 1; i < length(w); i++)
  if (w[i] == "mtu") printf "iface=%s %s\n", $2, w[i + 1] }'
printf 'ping=%s\n' "$(command -v ping)"
