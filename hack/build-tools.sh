#!/usr/bin/env bash
# Builds the pinned control-plane binaries (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager for the Deployment and ReplicaSet controllers, kwok) and Go
# tools into bin/ from the Go module proxy. Each binary is skipped when bin/ already
# holds it at the pinned version, so a warm machine pays nothing. Kubernetes and etcd cannot be `go install`ed directly
# (their go.mod files carry relative replace directives), so each is built from a
# scratch module that points the staging modules at their published versions.
# What is not built here is checked: terraform (the machines ship it) and moto, whose
# release hack/requirements.txt pins, each with how to get the right one.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
SCRATCH=${SCRATCH:-$BIN/.scratch}
KUBE_VERSION=${KUBE_VERSION:-v1.33.13}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.19.0}
TFPLUGINDOCS_VERSION=${TFPLUGINDOCS_VERSION:-v0.22.0}
TERRAFORM_VERSION=${TERRAFORM_VERSION:-v1.11.4}
mkdir -p "$BIN" "$SCRATCH"
export GOFLAGS=-buildvcs=false CGO_ENABLED=0

# stamp NAME VERSION: true when bin/NAME was built at VERSION.
have() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$BIN/.$1.version"; }

build_kube() {
  local want=() b
  for b in kube-apiserver kube-scheduler kube-controller-manager; do have "$b" "$KUBE_VERSION" || want+=("$b"); done
  [ ${#want[@]} -eq 0 ] && return
  echo "tools: building ${want[*]} $KUBE_VERSION (several minutes on a cold cache)"
  local dir=$SCRATCH/kube staging=v0${KUBE_VERSION#v1}
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init dovetail.local/kubetools >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
  # Every "k8s.io/x => ./staging/src/k8s.io/x" becomes "k8s.io/x => k8s.io/x v0.N.M".
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod" | while read -r m; do
    go mod edit -replace "$m=$m@$staging"
  done
  go mod edit -require "k8s.io/kubernetes@$KUBE_VERSION"
  go mod edit -go "$(sed -n 's/^go //p' "$gomod")"
  cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  go mod tidy >/dev/null
  local ver=${KUBE_VERSION#v} ld
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=${ver%%.*} -X $p.gitMinor=$(echo "$ver" | cut -d. -f2) -X $p.gitTreeState=clean"
  done
  for b in "${want[@]}"; do
    go build -ldflags "$ld" -o "$BIN/$b" "k8s.io/kubernetes/cmd/$b"
    stamp "$b" "$KUBE_VERSION"
  done
}

build_etcd() {
  have etcd "$ETCD_VERSION" && return
  echo "tools: building etcd $ETCD_VERSION"
  local dir=$SCRATCH/etcd
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init dovetail.local/etcdtools >/dev/null 2>&1
  go mod edit -require "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
  go mod tidy >/dev/null
  go build -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  stamp etcd "$ETCD_VERSION"
}

# go_install NAME PACKAGE VERSION
go_install() {
  have "$1" "$3" && return
  echo "tools: installing $1 $3"
  GOBIN=$BIN go install -ldflags "-s -w" "$2@$3"
  stamp "$1" "$3"
}

# ensure_terraform: the machines ship terraform; building it from the module proxy is a
# fallback that can fail, because its go.mod replaces nested backend modules the
# proxy does not serve. Say so plainly rather than with Go's error alone.
ensure_terraform() {
  command -v terraform >/dev/null 2>&1 && return
  have terraform "$TERRAFORM_VERSION" && return
  if ! GOBIN=$BIN go install "github.com/hashicorp/terraform@$TERRAFORM_VERSION"; then
    echo "tools: terraform is not on PATH and could not be built from github.com/hashicorp/terraform@$TERRAFORM_VERSION;" >&2
    echo "tools: install terraform $TERRAFORM_VERSION on PATH (the Terraform provider's tests need it)" >&2
    return 1
  fi
  stamp terraform "$TERRAFORM_VERSION"
}

# check_moto: the tests run moto_server and the catalog is generated from moto's data;
# another moto release answers differently, so the one hack/requirements.txt pins is
# required, with how to get it.
check_moto() {
  local want have
  want=$(sed -n 's/^moto\[server\]==//p' "$ROOT/hack/requirements.txt")
  if ! command -v moto_server >/dev/null 2>&1 || ! have=$(python3 -c 'import moto; print(moto.__version__)' 2>/dev/null); then
    echo "tools: moto_server (moto $want) is not installed; the AWS tests run it." >&2
    echo "tools: install it with: python3 -m pip install -r hack/requirements.txt" >&2
    return 1
  fi
  if [ "$have" != "$want" ]; then
    echo "tools: moto $have is installed; the tests and the catalog are pinned to moto $want (hack/requirements.txt)." >&2
    echo "tools: install it with: python3 -m pip install -r hack/requirements.txt" >&2
    return 1
  fi
}

# check_terraform: the provider's tests drive the terraform on PATH (or bin/).
check_terraform() {
  local have want=${TERRAFORM_VERSION#v}
  have=$(PATH=$BIN:$PATH terraform version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([0-9.]*\)".*/\1/p')
  if [ "$(printf '%s\n%s\n' "${want%.*}" "${have%.*}" | sort -V | head -1)" != "${want%.*}" ]; then
    echo "tools: terraform ${have:-?} is on PATH; the provider's tests need terraform ${want%.*} or newer ($TERRAFORM_VERSION is pinned)." >&2
    return 1
  fi
}

targets=${*:-all}
for t in $targets; do
  case $t in
    kube) build_kube ;;
    etcd) build_etcd ;;
    kwok) go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" ;;
    controller-gen) go_install controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_TOOLS_VERSION" ;;
    tfplugindocs) go_install tfplugindocs github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs "$TFPLUGINDOCS_VERSION" ;;
    terraform) ensure_terraform; check_terraform ;;
    moto) check_moto ;;
    all)
      (build_etcd); (build_kube)
      go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
      go_install controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "$CONTROLLER_TOOLS_VERSION"
      ensure_terraform; check_terraform
      check_moto ;;
    *) echo "tools: unknown target $t" >&2; exit 2 ;;
  esac
done
