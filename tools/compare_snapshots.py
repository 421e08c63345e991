"""Compare two folders written by tools/output_snapshot.sh: every stdout, stderr, exit code and output file.

Byte-identical after normalising the checkout path; manifest.json without its creation time and the inputs'
mtime / device / inode; JSON on stdout compared key by key to 1e-12."""
import json, math, re, sys
from pathlib import Path

# python tools/compare_snapshots.py BEFORE AFTER [CHECKOUT_A CHECKOUT_B]: the checkout paths are normalised away
a, b = Path(sys.argv[1]), Path(sys.argv[2])
SRC = re.compile(re.escape(sys.argv[3].encode()) + rb"|" + re.escape(sys.argv[4].encode())) if len(sys.argv) > 4 else \
    re.compile(rb"(?!)")

TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def config_hashes(root: Path) -> list[bytes]:
    """The config_sha256 of every inference config (they hash the creation time, so they differ run to run)."""
    out = []
    for f in sorted(root.rglob("inference_config.json")):
        out.append(json.loads(f.read_bytes())["config_sha256"].encode())
    return out


HASHES = {}


def norm(p: Path) -> bytes:
    data = SRC.sub(b"<SRC>", p.read_bytes())
    data = TIME.sub(b"<TIME>", data)
    for i, h in enumerate(HASHES[p.parts[:len(a.parts)] == a.parts]):
        data = data.replace(h, b"<CFG%d>" % i).replace(h[:12], b"<CFG%d>" % i)
    if p.name == "manifest.json":
        obj = json.loads(data)
        obj.pop("created", None)
        for f in obj.get("files", []):
            f.pop("sha256", None)      # each file is compared itself; its hash covers the checkout path
        for i in obj.get("inputs", []):
            for k in ("mtime_ns", "device", "inode"):
                i.pop(k, None)
        data = json.dumps(obj, sort_keys=True).encode()
    return data

def close(x, y, path="") -> list[str]:
    if isinstance(x, dict) and isinstance(y, dict):
        if x.keys() != y.keys():
            return [f"{path}: keys differ {sorted(set(x) ^ set(y))}"]
        return [e for k in x for e in close(x[k], y[k], f"{path}.{k}")]
    if isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            return [f"{path}: lengths {len(x)} vs {len(y)}"]
        return [e for i, (u, v) in enumerate(zip(x, y)) for e in close(u, v, f"{path}[{i}]")]
    if isinstance(x, float) or isinstance(y, float):
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and (
                x == y or (math.isfinite(x) and math.isfinite(y) and abs(x - y) <= 1e-12)):
            return []
        return [f"{path}: {x!r} vs {y!r}"]
    return [] if x == y else [f"{path}: {x!r} vs {y!r}"]

HASHES[True] = config_hashes(a)
HASHES[False] = config_hashes(b)
files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
bad = 0
for f in sorted(set(files_a) ^ set(files_b)):
    print("only in one:", f); bad += 1
n = 0
for f in sorted(set(files_a) & set(files_b)):
    n += 1
    x, y = norm(a / f), norm(b / f)
    if x == y:
        continue
    if f.suffix == ".stdout":
        try:
            errs = close(json.loads(x), json.loads(y))
            if not errs:
                print("equal to 1e-12 (not bytes):", f); continue
            print("DIFF", f, errs[:5]); bad += 1; continue
        except ValueError:
            pass
    print("DIFF", f); bad += 1
print(f"{n} files compared, {bad} differ")
sys.exit(1 if bad else 0)
