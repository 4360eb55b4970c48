#!/usr/bin/env bash
# make demo: the tools and binaries are built by the make prerequisites; this runs the
# narrated demo against them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./hack/demo --bin bin "$@"
