#!/bin/sh
# agent-tools setup of T7 (untimed, in the empty base directory): 32 npm
# packages p01..p32, each a package.json, an index.js, three modules in
# lib/ and a README, packed by npm pack into tgz/ (npm packs
# reproducibly: fixed times and modes), and app/, whose package.json
# depends on each tarball. Deterministic: the verifier's digests depend on
# it.
set -eu
mkdir -p src tgz app
i=1
deps=
while [ "$i" -le 32 ]; do
	n=$(printf '%02d' "$i")
	d=src/p$n
	mkdir -p "$d/lib"
	cat >"$d/package.json" <<JSON
{
  "name": "p$n",
  "version": "1.0.$i",
  "description": "generated package $n of 32",
  "main": "index.js",
  "license": "MIT"
}
JSON
	cat >"$d/index.js" <<JS
'use strict';
const a = require('./lib/a');
const b = require('./lib/b');
const c = require('./lib/c');
module.exports.value = () => a.value() + b.value() + c.value();
JS
	for m in a b c; do
		printf "'use strict';\n// p%s/lib/%s.js\nmodule.exports.value = () => %d;\n" "$n" "$m" "$((i * 3 + ${#m}))" >"$d/lib/$m.js"
	done
	printf '# p%s\n\nGenerated package %s of 32 for the agent-tools suite.\n' "$n" "$n" >"$d/README.md"
	deps="$deps${deps:+,
}    \"p$n\": \"file:../tgz/p$n-1.0.$i.tgz\""
	i=$((i + 1))
done
cat >app/package.json <<JSON
{
  "name": "app",
  "version": "1.0.0",
  "private": true,
  "dependencies": {
$deps
  }
}
JSON
cd tgz
HOME=$PWD/.. npm pack --offline --silent --logs-max=0 --cache "$PWD/../.npm-setup" ../src/p* >/dev/null
cd ..
rm -rf .npm-setup
