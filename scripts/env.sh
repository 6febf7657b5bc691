# Sourced by scripts: puts the project's Node 24 first on PATH when the system Node is older.
_kg_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -x "$_kg_root/.tools/node_modules/.bin/node" ]; then
  export PATH="$_kg_root/.tools/node_modules/.bin:$PATH"
fi
unset _kg_root
