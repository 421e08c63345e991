#!/usr/bin/env bash
# Runs a fixed set of calibview commands (metrics, report with ablations, comparison, slices, release, check,
# drift, apply, import, error cases, every --help) in /tmp/cvsnap and stores stdout, stderr, exit code and every
# output file under $1. Run it on two checkouts and compare them with tools/compare_snapshots.py: a change that
# should not alter behaviour must leave every byte equal.
#
#   SRC=/path/to/checkout PYTHONPATH=/path/to/checkout tools/output_snapshot.sh /tmp/before
#
# Keep the two checkouts' paths of equal length: manifest.json records file sizes, and calibrators.json the path.
set -u
dest=$(realpath -m "$1")
SRC=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
rm -rf /tmp/cvsnap "$dest"; mkdir -p /tmp/cvsnap "$dest"
cd /tmp/cvsnap
n=0
run() {
  n=$((n+1)); local tag=$(printf "%02d" $n)
  "$@" > "$dest/$tag.stdout" 2> "$dest/$tag.stderr"; echo $? > "$dest/$tag.rc"
  echo "$*" > "$dest/$tag.cmd"
}
run calibview metrics --json --calibrators none,ts,ts-grid,vs,ms,dirichlet,hb,ir,mrr --bins 10,15 --bandwidth 0.05 --n-boot 200 --seed 3
run calibview metrics --calibrators none,ts --n-boot 50
run calibview runs
run calibview report --out rep1 --quiet
run calibview report --out rep2 --quiet --calibrators none,ts,hb --bandwidth 0.02,0.05 --kernel gaussian,epanechnikov --n-boot 100 --layout grid --format png,svg
run calibview report --out rep3 --quiet --compare resnet110-brier/cifar10,resnet110-flsd53/cifar10 --calibrators none,ts --n-boot 100
run calibview report --out rep4 --quiet --eval-split test --run resnet110-brier/cifar10 --calibrators none,ts,platt,beta --n-boot 100 --audit 0.9,0.99 --target-precision 0.95 || true
run python $SRC/examples/deployment_demo.py deploy_demo.h5
run calibview slices deploy_demo.h5 --run resnet110-brier/cifar100 --eval-split deploy --by superclass
run calibview slices deploy_demo.h5 --run resnet110-brier/cifar100 --eval-split deploy --by superclass --json
run calibview slices deploy_demo.h5 --run resnet110-brier/cifar100 --eval-split deploy --by class --out slc
run calibview release deploy_demo.h5 --run resnet110-brier/cifar100 --calibrator ts --fit-split val --eval-split deploy --target-precision 0.95 --by superclass -o shipped
run calibview check shipped/inference_config.json deploy_demo.h5
run calibview check shipped/inference_config.json deploy_demo.h5 --json
run calibview check shipped/inference_config.json deploy_demo.h5 --max-ece 0.05 --max-class-ece 0.35
run calibview drift shipped/inference_config.json deploy_demo.h5 --run resnet110-brier/cifar100 --split shadow --refit-out shipped-2
demo=$(python -c "from calibview import demo_path; print(demo_path())")
run calibview apply rep1/calibrators.json "$demo" --run resnet110-brier/cifar10 --split test --calibrator-name ts -o cal.h5
python -c "import numpy as np; r=np.random.default_rng(0); np.savez('x.npz', logits_val=r.normal(size=(300,4)).astype(np.float32), labels_val=r.integers(0,4,300), logits_test=r.normal(size=(200,4)).astype(np.float32), labels_test=r.integers(0,4,200))"
run calibview import x.npz -o imp.h5
run calibview metrics imp.h5 --json --calibrators none,ts,vs --n-boot 20
run calibview apply shipped/inference_config.json deploy_demo.h5 --run resnet110-brier/cifar100 --split deploy -o cal2.h5
run calibview metrics deploy_demo.h5 --bandwidth 0 --json
run calibview metrics nonexistent.h5
run calibview report --out rep1 --quiet
run calibview metrics --bins 0
run calibview slices deploy_demo.h5 --run resnet110-brier/cifar100 --by nosuchcol
export COLUMNS=120
run calibview --help
for c in report metrics runs apply import check desktop-install drift release slices; do run calibview $c --help; done
# every file written, except the h5s (compared with h5dump), without the demo path difference
find . -type f | sort > "$dest/files.txt"
for f in $(find . -type f -not -name '*.h5'); do mkdir -p "$dest/out/$(dirname $f)"; cp "$f" "$dest/out/$f"; done
for f in $(find . -type f -name '*.h5'); do mkdir -p "$dest/out/$(dirname $f)"; h5dump "$f" > "$dest/out/$f.dump" 2>/dev/null || python -c "
import h5py,sys,numpy as np
def walk(g,p=''):
    for k in sorted(g):
        o=g[k]
        if isinstance(o,h5py.Group): print(p+k+'/', dict(o.attrs)); walk(o,p+k+'/')
        else: print(p+k, o.dtype, o.shape, (lambda x: (repr(x.tolist())[:200], __import__('hashlib').sha256(repr(x.tolist()).encode() if x.dtype==object else x.tobytes()).hexdigest()))(np.asarray(o)), dict(o.attrs))
with h5py.File(sys.argv[1],'r') as f: print(dict(f.attrs)); walk(f)
" "$f" > "$dest/out/$f.dump"; done
