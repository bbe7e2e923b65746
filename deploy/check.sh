#!/usr/bin/env bash
# Checks deploy/ without a cluster, a registry or a container engine:
#   - hadolint lints deploy/Containerfile;
#   - kubernetes-validate checks every manifest of deploy/kubernetes/ against
#     the schemas of recent Kubernetes versions (--strict: unknown fields are
#     errors);
#   - `tessera -t` checks the server.toml of the ConfigMap (its absolute
#     image paths mapped onto conf/) and conf/server.toml under the image's
#     environment overrides (the ENV of deploy/Containerfile).
# Both linters come from PyPI (deploy/requirements.txt, pinned) into a venv
# under target/, made again only when requirements.txt changes.
# Usage: bash deploy/check.sh   (after `cargo build` or `cargo build
# --release`; CHECK_TESSERA_BIN names another binary, default
# $CARGO_TARGET_DIR/debug/tessera, else .../release/tessera. Not TESSERA_*:
# the server reads those as configuration overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
venv=$target/deploy-venv
if ! cmp -s deploy/requirements.txt "$venv/requirements.txt"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-input -r deploy/requirements.txt
  cp deploy/requirements.txt "$venv/requirements.txt"
fi

echo "deploy: hadolint deploy/Containerfile"
"$venv/bin/hadolint" --no-color deploy/Containerfile

for k in 1.37.0 1.33.0; do
  echo "deploy: kubernetes-validate --strict -k $k deploy/kubernetes/*.yaml"
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$k" deploy/kubernetes/*.yaml
done

bin=${CHECK_TESSERA_BIN:-$target/debug/tessera}
if [ -z "${CHECK_TESSERA_BIN:-}" ] && [ ! -x "$bin" ] && [ -x "$target/release/tessera" ]; then
  bin=$target/release/tessera
fi
if [ ! -x "$bin" ]; then
  echo "deploy: no tessera binary at $bin: run cargo build first" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "deploy: tessera -t on the ConfigMap's server.toml"
"$venv/bin/python" - "$PWD/conf" "$tmp" <<'PY'
import sys, yaml
conf, tmp = sys.argv[1], sys.argv[2]
with open("deploy/kubernetes/configmap.yaml") as f:
    toml = yaml.safe_load(f)["data"]["server.toml"]
toml = toml.replace("/srv/tessera/conf", conf).replace("/var/log/tessera", tmp)
with open(f"{tmp}/server.toml", "w") as f:
    f.write(toml)
PY
"$bin" -t -c "$tmp/server.toml" >/dev/null

echo "deploy: tessera -t on conf/server.toml with the image's environment"
env_args=$("$venv/bin/python" - <<'PY'
import shlex
text = open("deploy/Containerfile").read().replace("\\\n", " ")
out = []
for line in text.splitlines():
    if line.startswith("ENV "):
        out += shlex.split(line[4:])
print(" ".join(shlex.quote(a) for a in out))
PY
)
eval "env $env_args \"\$bin\" -t -c conf/server.toml" >/dev/null
echo "deploy: ok"
