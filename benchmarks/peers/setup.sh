#!/usr/bin/env bash
# Builds one virtual environment per peer so benchmarks can run them beside us on the same data.
# mosaicml-streaming's import name `streaming` collides with ours, so it never shares our venv.
# LitData is installed with --no-deps to keep torch at 2.13.0 (the pre-placed CPU wheel); its
# runtime dependencies are then added by hand. s3fs lets LitData index Parquet files on S3
# (index_parquet_dataset lists and reads footers through fsspec) and lets Hugging Face datasets
# stream s3:// files; '>=2025' keeps the resolver from falling back to s3fs 0.4 (no aiobotocore)
# when boto3's newest botocore is ahead of aiobotocore's pin.
# PEERS (default "reference litdata hf") picks which venvs to build, e.g. PEERS="litdata hf".
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="${PEERS_DIR:-$root/.bench-venvs}"
mkdir -p "$dest"
peers="${PEERS:-reference litdata hf}"
wants() { case " $peers " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

make_venv() {
  local dir="$1"
  if [ ! -x "$dir/bin/python" ]; then
    python3 -m venv "$dir"
    "$dir/bin/pip" install -q --upgrade pip
    "$dir/bin/pip" install -q torch==2.13.0
  fi
}

if wants reference; then
  make_venv "$dest/reference"
  "$dest/reference/bin/pip" install -q mosaicml-streaming==0.13.0 'torch==2.13.0'
fi

if wants litdata; then
  make_venv "$dest/litdata"
  "$dest/litdata/bin/pip" install -q --no-deps litdata
  "$dest/litdata/bin/pip" install -q lightning-utilities filelock numpy boto3 requests 'urllib3>=1.26' \
    tifffile obstore zstandard zstd pyarrow polars 's3fs>=2025' 'torch==2.13.0'
fi

# Hugging Face datasets, streaming Parquet (benchmarks/parquet.py --peers).
if wants hf; then
  make_venv "$dest/hf"
  "$dest/hf/bin/pip" install -q datasets pyarrow 's3fs>=2025' 'torch==2.13.0'
fi

for peer in $peers; do
  "$dest/$peer/bin/python" -c "import importlib; m = {'reference': 'streaming', 'litdata': 'litdata s3fs', 'hf': 'datasets s3fs'}['$peer']; [importlib.import_module(n) for n in m.split()]; print('$peer ok')"
done
