#!/usr/bin/env bash
# Builds the npm tarballs from a built binary: `casebook` (the launcher and the TypeScript
# client, its types generated from the binary's OpenAPI document) and `@casebook/cli-linux-x64`
# (the binary). Nothing is published.
#
#   scripts/npm.sh [BINARY] [OUT]   # defaults: target/debug/casebook (under $CARGO_TARGET_DIR), target/npm
#
# The dev tools (typescript, openapi-typescript, @types/node, vitest) are installed once into
# target/node-tools. The packages are staged in OUT/stage, never in npm/: the generated types
# stay out of git.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
binary=${1:-${CARGO_TARGET_DIR:-target}/debug/casebook}
out=${2:-target/npm}
[[ -x $binary ]] || { echo "error: no casebook binary at \`$binary\`: run \`cargo build -p casebook-cli\` first" >&2; exit 2; }
binary=$(realpath "$binary")
mkdir -p "$out"
out=$(realpath "$out")

tools=$root/target/node-tools
if [[ ! -x $tools/node_modules/.bin/openapi-typescript || ! -x $tools/node_modules/.bin/tsc || ! -x $tools/node_modules/.bin/vitest ]]; then
  echo "installing the npm package's dev tools into target/node-tools" >&2
  mkdir -p "$tools"
  [[ -f $tools/package.json ]] || echo '{"private": true}' >"$tools/package.json"
  (cd "$tools" && npm install --no-audit --no-fund --silent typescript@5 openapi-typescript@7 vitest@3 @types/node@20 >&2)
fi

# The packages take the binary's version, so the launcher finds the platform package it names.
version=$("$binary" --version | awk '{print $2}')
stage=$out/stage
rm -rf "$stage"
mkdir -p "$stage"
cp -R npm/casebook "$stage/casebook"
cp -R npm/cli-linux-x64 "$stage/cli-linux-x64"
rm -rf "$stage/casebook/dist" "$stage/casebook/node_modules"
node - "$stage" "$version" <<'JS'
const fs = require("node:fs");
const [stage, version] = process.argv.slice(2);
for (const dir of ["casebook", "cli-linux-x64"]) {
  const file = `${stage}/${dir}/package.json`;
  const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
  pkg.version = version;
  if (pkg.optionalDependencies) for (const name of Object.keys(pkg.optionalDependencies)) pkg.optionalDependencies[name] = version;
  fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
}
JS

# The client's types, from the document the binary serves at /api/v1/openapi.json.
"$binary" serve --print-openapi >"$stage/openapi.json"
"$tools/node_modules/.bin/openapi-typescript" "$stage/openapi.json" --empty-objects-unknown \
  -o "$stage/casebook/src/openapi.ts" >&2
(cd "$stage/casebook" && "$tools/node_modules/.bin/tsc" -p tsconfig.json --typeRoots "$tools/node_modules/@types")

mkdir -p "$stage/cli-linux-x64/bin"
cp "$binary" "$stage/cli-linux-x64/bin/casebook"
# A debug build's debug information is most of its size (and of `npm pack`'s time).
if command -v strip >/dev/null; then strip --strip-debug "$stage/cli-linux-x64/bin/casebook"; fi
chmod 755 "$stage/cli-linux-x64/bin/casebook"

rm -f "$out"/casebook-*.tgz
(cd "$stage/casebook" && npm pack --silent --pack-destination "$out" >/dev/null)
(cd "$stage/cli-linux-x64" && npm pack --silent --pack-destination "$out" >/dev/null)
ls "$out"/casebook-*.tgz
