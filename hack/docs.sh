#!/usr/bin/env bash
# Regenerates docs/ with tfplugindocs from the provider's schema, examples/ and
# templates/docs/. The schema comes from the real terraform binary talking to a fresh
# build of the provider through a dev_overrides CLI config, so nothing is downloaded.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

go build -o "$WORK/plugins/terraform-provider-dovetail" "$ROOT/provider/cmd/terraform-provider-dovetail"
cat >"$WORK/cli.tfrc" <<CFG
provider_installation {
  dev_overrides {
    "dovetail-sh/dovetail" = "$WORK/plugins"
  }
  direct {}
}
CFG
mkdir -p "$WORK/module"
cat >"$WORK/module/main.tf" <<'TF'
terraform {
  required_providers {
    dovetail = { source = "dovetail-sh/dovetail" }
  }
}
TF
(cd "$WORK/module" && TF_CLI_CONFIG_FILE="$WORK/cli.tfrc" CHECKPOINT_DISABLE=1 terraform providers schema -json >"$WORK/schema.json" 2>"$WORK/terraform.log") || {
  cat "$WORK/terraform.log" >&2
  exit 1
}
# tfplugindocs finds a schema under the bare provider name or hashicorp's namespace only.
sed -i 's#"registry.terraform.io/dovetail-sh/dovetail":#"dovetail":#' "$WORK/schema.json"
cd "$ROOT"
"$BIN/tfplugindocs" generate --provider-name dovetail --rendered-provider-name Dovetail \
  --providers-schema "$WORK/schema.json" --website-source-dir templates/docs --examples-dir examples >/dev/null
