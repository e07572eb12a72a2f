"""repro.sh's helper on the box: reads a capsule's run.json, fills the evaluation's argv, compares
a fresh evaluation's metrics with the sealed ones, and writes the one JSON report. repro.sh does
the steps in order (validate, evaluate into a fresh temporary dir, compare) and calls this file
for each part that needs JSON.

Standard library only, Python 3.8 or newer: this file is copied beside repro.sh (into the user's
project, or onto the box) and run by whatever python3 is there, never imported by the server.

    repro_onbox.py check CAPSULE            "test <id>" / "problem <why>" lines; exit 2 on a problem
    repro_onbox.py env CAPSULE              one JSON line: does this python match the recorded env lock
    repro_onbox.py argv CAPSULE TEST OUT    the evaluation's argv, NUL-separated; exit 3 (why on stderr)
    repro_onbox.py compare CAPSULE TEST FRESH EXIT LOG T0 T1  one JSON line: a verdict per metric
    repro_onbox.py untouched CAPSULE 1|0    one JSON line: the capsule's listing is (1) or is not the same
    repro_onbox.py report PARTS OUT_FILE    the report from the JSON lines; exit 0 reproduced, 1 not
    repro_onbox.py bad OUT_FILE WHY...      the report of a refused input; exit 2

A metric is reproduced when |fresh - sealed| <= abs + rel * |sealed|: abs from run.json's
evaluate.tolerance for that metric (rel 0 then), else the default 1e-6 abs + 1e-6 rel."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

SCHEMA = "remote-gpu-trainer/repro-report/v1"
DEFAULT_ABS = 1e-6
DEFAULT_REL = 1e-6
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PLACEHOLDERS = ("checkpoint", "config", "out", "test")
LOG_LINES = 10
LINE_CHARS = 300
LOCK_LISTED = 10  # mismatched packages named in the env finding


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def load_run(capsule: str) -> dict[str, Any]:
    with open(os.path.join(capsule, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    if not isinstance(run, dict):
        raise ValueError("run.json is not a JSON object")
    return run


def run_id(capsule: str) -> str:
    try:
        rid = load_run(capsule).get("run_id")
    except (OSError, ValueError):
        rid = None
    return rid if isinstance(rid, str) and rid else os.path.basename(os.path.normpath(capsule))


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def declared_tests(run: dict[str, Any]) -> list[str]:
    tests = run.get("tests")
    if not isinstance(tests, list) or not tests:
        raise ValueError("run.json declares no tests (`tests` must be a non-empty list of test ids)")
    bad = [t for t in tests if not isinstance(t, str) or not ID.match(t)]
    if bad:
        raise ValueError("run.json's tests hold an id that is not letters, digits . _ - (first character a "
                         "letter or digit)")
    return tests


def evaluate_spec(run: dict[str, Any]) -> dict[str, Any] | None:
    spec = run.get("evaluate")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise ValueError("run.json's evaluate is neither null nor an object")
    argv = spec.get("command")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("run.json's evaluate.command is not an argv list of strings (a shell string is not run)")
    tol = spec.get("tolerance") or {}
    if not isinstance(tol, dict) or not all(is_number(v) and v >= 0 for v in tol.values()):
        raise ValueError("run.json's evaluate.tolerance is not a map of metric name to a non-negative number")
    return spec


def file_problems(capsule: str, run: dict[str, Any]) -> list[str]:
    """The sealed files run.json lists whose bytes are no longer the sealed ones."""
    files = run.get("files") or {}
    if not isinstance(files, dict):
        return ["run.json's files is not a map of capsule path to its hash"]
    out = []
    for rel, rec in sorted(files.items()):
        parts = rel.split("/")
        if rel.startswith("/") or ".." in parts:
            out.append("run.json lists a file outside the capsule")
            continue
        path = os.path.join(capsule, *parts)
        want = rec.get("sha256") if isinstance(rec, dict) else None
        if not os.path.isfile(path):
            out.append(f"sealed file {rel} is missing")
        elif isinstance(want, str) and sha256(path) != want.split(":")[-1]:
            out.append(f"sealed file {rel} does not hold the bytes run.json sealed (its sha256 differs): the capsule "
                       "was changed after sealing")
    return out


def sealed_numbers(path: str) -> bool:
    try:
        return any(is_number(v) for v in read_metrics(path).values())
    except (OSError, ValueError):
        return not os.path.exists(path)  # a missing one is repro.sh's own finding


def check(capsule: str) -> int:
    try:
        run = load_run(capsule)
        tests = declared_tests(run)
        evaluate_spec(run)
    except OSError:
        sys.stdout.write("problem run.json cannot be read\n")
        return 2
    except json.JSONDecodeError:
        sys.stdout.write("problem run.json is not valid JSON\n")
        return 2
    except ValueError as exc:
        sys.stdout.write(f"problem {exc}\n")
        return 2
    problems = file_problems(capsule, run)
    test_dir = os.path.join(capsule, "test")
    present = set(os.listdir(test_dir)) if os.path.isdir(test_dir) else set()
    problems += [f"declared test {t} has no test/{t} dir" for t in tests if t not in present]
    problems += [f"test/{t} is not declared in run.json's tests" for t in sorted(present - set(tests))]
    problems += [f"test/{t}/metrics.json holds no metric (a JSON object with numbers)" for t in tests
                 if t in present and not sealed_numbers(os.path.join(test_dir, t, "metrics.json"))]
    for p in problems:
        sys.stdout.write("problem " + p + "\n")
    for t in tests:
        sys.stdout.write("test " + t + "\n")
    return 2 if problems else 0


def is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def lock_path(capsule: str, lock: object) -> tuple[str | None, str | None]:
    """The recorded env lock as (path or None, sha256 or None)."""
    if not isinstance(lock, (str, dict)):
        return None, None
    path, digest = (lock, None) if isinstance(lock, str) else (lock.get("path"), lock.get("sha256"))
    if not isinstance(path, str) or not path:
        return None, digest if isinstance(digest, str) else None
    for base in ("", os.getcwd(), capsule, os.path.dirname(os.path.normpath(capsule))):
        found = os.path.join(base, path) if base else path
        if (os.path.isabs(path) or base) and os.path.isfile(found):
            return found, digest if isinstance(digest, str) else None
    return path, digest if isinstance(digest, str) else None


def pins(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;#\\]+)", line)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def installed() -> dict[str, str]:
    from importlib import metadata  # 3.8+

    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
    return out


def env_finding(capsule: str) -> dict[str, Any]:
    finding = {"kind": "env", "capsule": run_id(capsule), "python": sys.version.split()[0],
               "executable": sys.executable, "platform": sys.platform}
    try:
        prov = load_run(capsule).get("provenance") or {}
    except (OSError, ValueError):
        prov = {}
    lock = prov.get("env_lock") if isinstance(prov, dict) else None
    path, digest = lock_path(capsule, lock)
    if lock is None:
        return dict(finding, status="unknown", detail="the capsule records no env lock: nothing to compare with")
    if path is None or not os.path.isfile(path):
        return dict(finding, status="unknown", detail="the recorded env lock is not here (looked beside the "
                    "capsule and in the working directory): this python was not compared with it")
    if digest and sha256(path) != digest.split(":")[-1]:
        return dict(finding, status="differs", lock=path, detail="the env lock found here is not the one the run "
                    "recorded (its sha256 differs)")
    with open(path, encoding="utf-8", errors="replace") as f:
        wanted = pins(f.read())
    if not wanted:
        return dict(finding, status="unknown", lock=path, detail="the env lock names no `name==version` pins this "
                    "check can read")
    have = installed()
    off = [f"{n}=={v} (here: {have.get(n, 'absent')})" for n, v in sorted(wanted.items()) if have.get(n) != v]
    if off:
        listed = ", ".join(off[:LOCK_LISTED])
        return dict(finding, status="differs", lock=path,
                    detail=f"{len(off)} of {len(wanted)} pinned packages differ here: {listed}")
    return dict(finding, status="matches", lock=path, detail=f"all {len(wanted)} pinned packages match")


def argv(capsule: str, test: str, out: str) -> int:
    spec = evaluate_spec(load_run(capsule))
    if spec is None:
        sys.stderr.write("the capsule records no evaluate command (run.json's evaluate is null)\n")
        return 3
    values = {"checkpoint": os.path.join(capsule, "best.pth"), "config": os.path.join(capsule, "config.yaml"),
              "out": out, "test": test}
    words = []
    for word in spec["command"]:
        for key in PLACEHOLDERS:
            word = word.replace(f"{{{key}}}", values[key])
        words.append(word)
    sys.stdout.write("\0".join(words) + "\0")
    return 0


def tolerance(spec: dict[str, Any] | None, metric: str) -> dict[str, Any]:
    given = (spec or {}).get("tolerance") or {}
    if metric in given:
        return {"abs": float(given[metric]), "rel": 0.0, "source": "run.json evaluate.tolerance"}
    return {"abs": DEFAULT_ABS, "rel": DEFAULT_REL, "source": "default"}


def finite(v: float) -> float | None:
    """A number JSON can carry (NaN and infinities become null, named in the verdict's why)."""
    return v if math.isfinite(v) else None


def verdict(metric: str, sealed: float, fresh: object, tol: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"metric": metric, "sealed": finite(sealed), "tolerance": tol}
    if not is_number(fresh):
        return dict(row, outcome="could_not_run", why=f"the fresh metrics.json has no number for {metric}")
    new = float(fresh)  # type: ignore[arg-type]  # is_number checked it
    if not (math.isfinite(sealed) and math.isfinite(new)):
        same = repr(sealed) == repr(new)
        return dict(row, fresh=finite(new), outcome="reproduced" if same else "differs",
                    why=f"sealed {sealed!r}, fresh {new!r}: not finite numbers, compared as equal or not")
    diff = abs(new - sealed)
    rel = diff / abs(sealed) if sealed else (0.0 if diff == 0 else None)
    ok = diff <= tol["abs"] + tol["rel"] * abs(sealed)
    return dict(row, fresh=new, abs_diff=diff, rel_diff=rel, outcome="reproduced" if ok else "differs")


def read_metrics(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        got = json.load(f)
    if not isinstance(got, dict):
        raise ValueError("not a JSON object")
    return got


def log_tail(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [ln[:LINE_CHARS] for ln in lines[-LOG_LINES:]]


def elapsed(started: str, ended: str) -> float:
    try:  # bash's $EPOCHREALTIME, whose decimal mark follows the locale
        return round(float(ended.replace(",", ".")) - float(started.replace(",", ".")), 3)
    except ValueError:
        return 0.0


def compare(capsule: str, test: str, fresh_dir: str, code: str, log: str, started: str, ended: str) -> dict[str, Any]:
    part: dict[str, Any] = {"kind": "test", "capsule": run_id(capsule), "test": test, "exit_status": int(code),
                            "seconds": elapsed(started, ended), "log_tail": log_tail(log), "metrics": []}
    try:
        sealed = read_metrics(os.path.join(capsule, "test", test, "metrics.json"))
    except (OSError, ValueError):
        return dict(part, why=f"the sealed test/{test}/metrics.json is not a JSON object")
    spec = evaluate_spec(load_run(capsule))
    names = sorted(k for k, v in sealed.items() if is_number(v))
    fresh: dict[str, Any] = {}
    why = None
    if spec is None:
        why = "the capsule records no evaluate command (run.json's evaluate is null)"
    elif int(code) != 0:
        why = f"the evaluation exited {code} before its metrics could be compared"
    else:
        try:
            fresh = read_metrics(os.path.join(fresh_dir, "metrics.json"))
        except (OSError, ValueError):
            why = "the evaluation exited 0 but wrote no readable metrics.json into its fresh dir ({out})"
    if why is not None:
        part["metrics"] = [{"metric": n, "sealed": finite(float(sealed[n])), "tolerance": tolerance(spec, n),
                            "outcome": "could_not_run", "why": why} for n in names]
        return dict(part, why=why)
    rows = [verdict(n, float(sealed[n]), fresh.get(n), tolerance(spec, n)) for n in names]
    if isinstance(sealed.get("split"), str) and fresh.get("split") not in (None, sealed["split"]):
        rows.append({"metric": "split", "outcome": "differs", "tolerance": None,
                     "why": "the fresh evaluation reports another split than the sealed metrics"})
    return dict(part, metrics=rows)


def untouched(capsule: str, same: str) -> dict[str, Any]:
    return {"kind": "untouched", "capsule": run_id(capsule), "untouched": same == "1"}


def write_json(path: str, obj: object) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def assemble(parts: list[dict[str, Any]]) -> dict[str, Any]:
    capsules: dict[str, dict[str, Any]] = {}
    for part in parts:
        entry = capsules.setdefault(part["capsule"], {"run_id": part["capsule"], "env": None, "tests": [],
                                                      "untouched": None})
        if part["kind"] == "env":
            entry["env"] = {k: v for k, v in part.items() if k not in ("kind", "capsule")}
        elif part["kind"] == "test":
            entry["tests"].append({k: v for k, v in part.items() if k not in ("kind", "capsule")})
        elif part["kind"] == "untouched":
            entry["untouched"] = part["untouched"]
    rows = [m for c in capsules.values() for t in c["tests"] for m in t["metrics"]]
    rows += [{"outcome": "could_not_run"} for c in capsules.values() for t in c["tests"] if not t["metrics"]]
    changed = [c["run_id"] for c in capsules.values() if c["untouched"] is False]
    outcomes = {m["outcome"] for m in rows}
    if not rows:
        outcome = "could_not_run"
    elif "differs" in outcomes or changed:
        outcome = "differs"
    elif "could_not_run" in outcomes:
        outcome = "could_not_run"
    else:
        outcome = "reproduced"
    problems = [f"capsule {c} changed while it was reproduced: something wrote into it" for c in changed]
    return {"schema": SCHEMA, "finished_at": now(), "outcome": outcome, "exit_code": 0 if outcome == "reproduced"
            else 1, "problems": problems, "default_tolerance": {"abs": DEFAULT_ABS, "rel": DEFAULT_REL},
            "capsules": list(capsules.values())}


def report(parts_file: str, out_file: str) -> int:
    with open(parts_file, encoding="utf-8") as f:
        parts = [json.loads(line) for line in f if line.strip()]
    rep = assemble(parts)
    write_json(out_file, rep)
    count = sum(len(t["metrics"]) for c in rep["capsules"] for t in c["tests"])
    sys.stdout.write(f"repro: {rep['outcome']} ({count} metric(s); report {out_file})\n")
    return int(rep["exit_code"])


def bad(out_file: str, *problems: str) -> int:
    write_json(out_file, {"schema": SCHEMA, "finished_at": now(), "outcome": "bad_input", "exit_code": 2,
                          "problems": list(problems), "default_tolerance": {"abs": DEFAULT_ABS, "rel": DEFAULT_REL},
                          "capsules": []})
    return 2


def emit(obj: object) -> int:
    sys.stdout.write(json.dumps(obj, allow_nan=False) + "\n")
    return 0


COMMANDS: dict[str, tuple[int, Callable[..., int]]] = {  # name: (argument count, -1 for one or more; function)
    "check": (1, check), "argv": (3, argv), "report": (2, report), "bad": (-1, bad),
    "env": (1, lambda c: emit(env_finding(c))), "compare": (7, lambda *a: emit(compare(*a))),
    "untouched": (2, lambda *a: emit(untouched(*a))),
}


def main(args: list[str]) -> int:
    count, fn = COMMANDS.get(args[0] if args else "", (0, None))
    if fn is None or not (len(args) - 1 == count or (count == -1 and len(args) > 1)):
        sys.stderr.write("usage: repro_onbox.py " + "|".join(COMMANDS) + " ARGS... (see its docstring)\n")
        return 64
    return fn(*args[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
