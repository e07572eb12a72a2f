"""The remote manifest: size + SHA-256 of every roster file, computed ON the box with the
fastest hasher there (Python hashlib, else openssl, else sha256sum), files hashed in
parallel up to the box's cores. Hashing runs detached so a large roster never holds a
tool call; the finished manifest is written next to the data and never overwritten."""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from mcp_server import __version__
from mcp_server.errors import CommandFailed, InputError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import heredoc, path_word, quote
from mcp_server.verify.artifacts.roster import RemoteEntry, parse_listing

SCHEMA = "remote-gpu-trainer/PULL/v2"
MAX_LIST = 200_000

HASHER_PY = r"""
import hashlib, sys
from concurrent.futures import ProcessPoolExecutor

def one(p):
    # Plain read() of fresh 1 MiB bytes measured faster here than readinto + memoryview.
    h, n = hashlib.sha256(), 0
    with open(p, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b); n += len(b)
    return p, n, h.hexdigest()

def main():
    paths = [p for p in sys.stdin.buffer.read().split(b"\n") if p]
    workers = max(1, min(int(sys.argv[1]), len(paths)))
    out = sys.stdout.buffer
    # Processes, not threads: hashing in threads did not scale across cores in measurements.
    results = map(one, paths) if workers == 1 else ProcessPoolExecutor(workers).map(one, paths, chunksize=1)
    for p, n, d in results:
        out.write(d.encode() + b"\t" + str(n).encode() + b"\t" + p + b"\n"); out.flush()

if __name__ == "__main__":
    main()
"""


class ManifestFile(BaseModel):
    path: str
    bytes: int
    sha256: str


class Manifest(BaseModel):
    schema_: str = Field(default=SCHEMA, alias="schema")
    run_id: str | None
    host: str
    root: str
    roster: list[str]
    created_at_utc: str
    tool: str = "remote-gpu-trainer-mcp"
    tool_version: str = __version__
    hasher: str
    files: list[ManifestFile]
    totals: dict[str, int]

    model_config = {"populate_by_name": True}

    def canonical(self) -> bytes:
        return (json.dumps(self.model_dump(by_alias=True), sort_keys=True, indent=2) + "\n").encode()


def listing_script(root: str) -> str:
    r = path_word(root, "root")
    return f"""[ -d {r} ] || {{ echo RGT-NOROOT; exit 0; }}
cd {r} || exit 1
printf 'abs=%s\\nnproc=%s\\nnow=%s\\n' "$(pwd -P)" "$(nproc 2>/dev/null || echo 1)" "$(date +%s.%N)"
printf 'python=%s\\nopenssl=%s\\nsha256sum=%s\\n' "$(command -v python3)" "$(command -v openssl)" "$(command -v sha256sum)"
echo RGT-LIST
find . -mindepth 1 \\( -type f -o -type l \\) -printf '%y\\t%s\\t%T@\\t%P\\t%l\\0' 2>/dev/null | head -z -n {MAX_LIST + 1}
"""


async def list_root(host: Host, root: str) -> tuple[dict[str, str], list[RemoteEntry]]:
    res = await host.run(listing_script(root), timeout=30)
    res.check("listing the result root")
    if res.stdout.startswith(b"RGT-NOROOT"):
        raise InputError("the result root does not exist on the box", host=host.name, path=root,
                         next_step="pass the directory that holds the results (absolute or ~/...)")
    head, _, body = res.stdout.partition(b"RGT-LIST\n")
    facts = parse_kv(head.decode("utf-8", "replace"))
    entries = parse_listing(body)
    if len(entries) > MAX_LIST:
        raise InputError(f"more than {MAX_LIST} files under the root", host=host.name, path=root,
                         next_step="point root at the result directory, not the project or a cache")
    return facts, entries


def hasher_for(facts: dict[str, str]) -> str:
    return "python-hashlib" if facts.get("python") else "openssl" if facts.get("openssl") else "sha256sum"


async def start_hashing(host: Host, abs_root: str, files: list[RemoteEntry], facts: dict[str, str]) -> str:
    """Start the detached hasher; returns the job id (its dir is <root>/.rgt-hash-<id>)."""
    job = secrets.token_hex(6)
    j = quote(f"{abs_root}/.rgt-hash-{job}")
    n = max(1, int(facts.get("nproc", "1") or 1))
    kind = hasher_for(facts)
    jd = f"{abs_root}/.rgt-hash-{job}"
    if kind == "python-hashlib":
        run = f'{quote(facts["python"])} {quote(jd + "/hasher.py")} {n} < {quote(jd + "/list")}'
    else:
        tool = "openssl dgst -sha256 -r" if kind == "openssl" else "sha256sum"
        # Both print "<hex> <mark><path>"; turn that into "<hex>\t-\t<path>".
        run = (f"tr '\\n' '\\0' < {quote(jd + '/list')} | xargs -0 -P {n} -n 8 {tool} "
               "| sed 's/^\\([0-9a-f]\\{64\\}\\) [ *]/\\1\\t-\\t/'")
    runner = (f"cd {quote(abs_root)} || exit 1\n{{ {run} ; }} > {quote(jd + '/out.partial')} 2> {quote(jd + '/err')}\n"
              f"echo $? > {quote(jd + '/rc.tmp')} && mv {quote(jd + '/rc.tmp')} {quote(jd + '/rc')}\n")
    script = "\n".join([
        f"j={j}; mkdir -p \"$j\" || exit 1",
        'cat > "$j/list"',
        heredoc('"$j/hasher.py"', HASHER_PY),
        heredoc('"$j/run.sh"', runner),
        'setsid -f sh "$j/run.sh" >/dev/null 2>&1 </dev/null',
        "echo RGT-HASHING",
    ]) + "\n"
    payload = "".join(f"{f.path}\n" for f in files).encode()
    res = await host.run(script, stdin=payload, timeout=30)
    if "RGT-HASHING" not in res.text:
        raise CommandFailed("could not start hashing on the box", host=host.name, stderr=res.err_text)
    return job


async def poll_hashing(host: Host, abs_root: str, job: str) -> tuple[bool, dict[str, tuple[int | None, str]], str]:
    """(finished, {path: (bytes or None, sha256)}, stderr tail)."""
    j = quote(f"{abs_root}/.rgt-hash-{job}")
    res = await host.run(f'j={j}; if [ -f "$j/rc" ]; then echo "RGT-RC $(cat "$j/rc")"; fi; '
                         f'echo RGT-OUT; cat "$j/out.partial" 2>/dev/null; echo RGT-ERR; tail -c 2000 "$j/err" 2>/dev/null',
                         timeout=30)
    head, _, rest = res.text.partition("RGT-OUT\n")
    out, _, err = rest.partition("RGT-ERR\n")
    done = head.startswith("RGT-RC ")
    got: dict[str, tuple[int | None, str]] = {}
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and len(parts[0]) == 64:
            path = parts[2][2:] if parts[2].startswith("./") else parts[2]
            got[path] = (int(parts[1]) if parts[1].isdigit() else None, parts[0].lower())
    return done, got, err


async def write_manifest(host: Host, abs_root: str, job: str, manifest: Manifest) -> str:
    """Write the manifest beside the data without ever replacing one: the first free name of
    PULL_MANIFEST.json, PULL_MANIFEST.2.json, ... (a hard link fails if the name exists)."""
    data = manifest.canonical().decode()
    j = f"{abs_root}/.rgt-hash-{job}"
    script = f"""j={quote(j)}; r={quote(abs_root)}
cat > "$j/manifest.json"
for k in "" .2 .3 .4 .5 .6 .7 .8 .9 .10 .11 .12 .13 .14 .15 .16 .17 .18 .19 .20; do
  t="$r/PULL_MANIFEST$k.json"
  if ln "$j/manifest.json" "$t" 2>/dev/null || {{ [ ! -e "$t" ] && (set -C; cat "$j/manifest.json" > "$t") 2>/dev/null; }}; then
    rm -rf -- "$j"; echo "RGT-MANIFEST PULL_MANIFEST$k.json"; exit 0; fi
done
echo RGT-FULL
"""
    res = await host.run(script, stdin=data.encode(), timeout=30)
    for line in res.text.splitlines():
        if line.startswith("RGT-MANIFEST "):
            return line.split(" ", 1)[1]
    raise CommandFailed("could not write the manifest on the box (20 manifests already exist?)",
                        host=host.name, path=abs_root, stderr=res.err_text)


def build_manifest(host_name: str, root: str, roster: list[str], run_id: str | None, hasher: str,
                   files: list[tuple[str, int, str]]) -> Manifest:
    return Manifest(
        run_id=run_id, host=host_name, root=root, roster=roster,
        created_at_utc=datetime.now(UTC).isoformat(timespec="seconds"), hasher=hasher,
        files=[ManifestFile(path=p, bytes=n, sha256=d) for p, n, d in files],
        totals={"files": len(files), "bytes": sum(n for _, n, _ in files)},
    )


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
