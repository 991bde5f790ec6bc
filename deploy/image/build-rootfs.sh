#!/usr/bin/env bash
# Assembles the root filesystem of the Operon image (deploy/Containerfile is FROM scratch
# and copies it in): the operon binary and the sandbox launcher beside it
# (operon-sandbox-exec, from the same build), the programs shell hooks commonly use, and the
# shared libraries they load, copied from this machine. Nothing is downloaded.
#
#   deploy/image/build-rootfs.sh OPERON_BINARY OUT_DIR [MODULES_DIR]
#
# KUBECTL=PATH adds that kubectl (for hooks that call it themselves, under operon serve
# --hook-cluster-access); without it the image has none, and is 55 MB smaller.
#
# MODULES_DIR's *.wasm go to /usr/lib/operon/modules, the image's --modules directory:
# give target/wasm32-wasip2/release after
# `cargo build --release --target wasm32-wasip2 -p node-collector`, so that the agent's
# process and mount built-ins find node_collector.wasm.
#
# OUT_DIR receives rootfs/ and the Containerfile, ready as a build context:
#
#   deploy/image/build-rootfs.sh target/release/operon target/container
#   buildah bud -f target/container/Containerfile -t operon:dev target/container   # or podman build
#
# OUT_DIR/rootfs must not exist yet or be empty (it is never deleted). The programs are
# the host's own builds, so build on the distribution (and architecture) you want in
# the image; a Debian or Ubuntu host with bash, jq, util-linux, coreutils and systemd
# (journalctl) works.
set -euo pipefail

die() {
  echo "build-rootfs.sh: $*" >&2
  exit 1
}

[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: build-rootfs.sh OPERON_BINARY OUT_DIR [MODULES_DIR]"
binary=$1
out=$2
modules=${3:-}
[ -z "$modules" ] || [ -d "$modules" ] || die "$modules is not a directory"
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$binary" ] || die "$binary is not an executable (build it: cargo build --release -p operon-engine)"
launcher=$(dirname "$binary")/operon-sandbox-exec
[ -x "$launcher" ] || die "$launcher is missing: the sandbox's launcher is built with operon (cargo build --release -p operon-engine builds both; with --bin, name both)"
command -v ldd >/dev/null || die "ldd is missing (it comes with the C library's tools)"

root=$out/rootfs
mkdir -p "$root"
[ -z "$(ls -A "$root")" ] || die "$root is not empty; remove it first"
root=$(cd "$root" && pwd)

# Programs besides operon: a shell and jq (every shell-operator hook), util-linux's
# unshare (the script sandbox's namespaces; the sandbox calls /usr/bin/unshare and
# /bin/true), coreutils, and the text tools hook scripts reach for.
coreutils=(
  base64 basename cat chmod chown cksum comm cp csplit cut date dd df dirname du echo
  env expand expr factor false fmt fold head id install join link ln ls md5sum mkdir
  mkfifo mktemp mv nl nproc numfmt od paste printenv printf pwd readlink realpath rm
  rmdir seq sha1sum sha256sum sha512sum shuf sleep sort split stat sync tac tail tee
  test timeout touch tr true truncate tsort uname unexpand uniq unlink wc whoami yes
)
# journalctl reads a node's journal for steps that declare it (`readOnlyPaths`; the
# node-diagnosis example's kubelet log), with the agent's node root (deploy/node-access).
programs=(bash jq unshare grep sed awk find xargs gzip journalctl "${coreutils[@]}")

# A merged /usr, as Debian and Fedora lay it out: /bin, /sbin and /lib point into /usr,
# so every path a library or script names resolves.
mkdir -p "$root"/usr/{bin,sbin,lib,local/bin} "$root"/etc
ln -s usr/bin "$root/bin"
ln -s usr/sbin "$root/sbin"
ln -s usr/lib "$root/lib"
if [ -e /lib64 ]; then
  mkdir -p "$root/usr/lib64"
  ln -s usr/lib64 "$root/lib64"
fi

# Copies a file's content to the same path inside the root (through the links above).
copy_file() {
  local source=$1 target=$root$1
  [ -e "$target" ] && return 0
  mkdir -p "$(dirname "$target")"
  cp -L "$source" "$target"
}

# Copies the shared libraries `ldd` names for an executable, and the dynamic loader.
copy_libraries() {
  local line path
  while read -r line; do
    case $line in
      *"=> not found"*) die "$1 needs a library that is missing here: $line" ;;
      *"=> /"*) path=${line#*=> }; path=${path%% (*} ;;
      /*) path=${line%% (*} ;;
      *) continue ;; # linux-vdso, statically linked
    esac
    copy_file "$path"
  done < <(ldd "$1" 2>/dev/null || true)
}

# operon itself and the script sandbox's launcher, built with it (operon uses the
# launcher beside it: each waiting launcher then maps a small program, not the engine),
# without their debug information when strip is available.
install_binary() {
  if command -v strip >/dev/null; then
    strip --strip-debug -o "$root/usr/local/bin/$2" "$1"
  else
    cp "$1" "$root/usr/local/bin/$2"
  fi
  chmod 0755 "$root/usr/local/bin/$2"
  copy_libraries "$1"
}
install_binary "$binary" operon
install_binary "$launcher" operon-sandbox-exec

for program in "${programs[@]}"; do
  path=$(type -P "$program" || true)
  [ -n "$path" ] || die "$program is not installed here (bash, jq, util-linux, coreutils, grep, sed, awk, findutils, gzip, systemd's journalctl)"
  cp -L "$path" "$root/usr/bin/$program"
  copy_libraries "$path"
done
ln -s bash "$root/usr/bin/sh"
# kubectl, for hooks that call it themselves (operon serve --hook-cluster-access), when
# KUBECTL names one; without it such hooks fail with "kubectl: command not found".
if [ -n "${KUBECTL:-}" ]; then
  [ -x "$KUBECTL" ] || die "KUBECTL=$KUBECTL is not an executable"
  cp -L "$KUBECTL" "$root/usr/bin/kubectl"
  copy_libraries "$KUBECTL"
fi

# Users and name lookups: root, and the unprivileged user the controller runs as.
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
# The mount table where tools look for it (df, findmnt): /proc/self/mounts, which in a
# sandboxed run without a private /proc is the run's snapshot.
ln -s ../proc/self/mounts "$root/etc/mtab"
# CA certificates, for hooks and HTTP processors that call TLS endpoints.
for bundle in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
  if [ -f "$bundle" ]; then
    mkdir -p "$root/etc/ssl/certs"
    cp -L "$bundle" "$root/etc/ssl/certs/ca-certificates.crt"
    break
  fi
done

# Where the Deployment mounts volumes, usable without them too (docker run): the hooks,
# the debug socket, the module cache and $TMPDIR.
mkdir -p "$root"/{hooks,tmp,var/run/operon,var/cache/operon,home/nonroot,root,usr/lib/operon/modules}
if [ -n "$modules" ]; then
  for module in "$modules"/*.wasm; do
    [ -e "$module" ] || continue
    install -m 0644 "$module" "$root/usr/lib/operon/modules/"
  done
fi
chmod 1777 "$root/tmp" "$root/var/run/operon" "$root/var/cache/operon"
chmod 0755 "$root/hooks"
chmod 0700 "$root/root"
chmod 0777 "$root/home/nonroot"

cp "$here/../Containerfile" "$out/Containerfile"
echo "build-rootfs.sh: $root ($(du -sh "$root" | cut -f1)); build with: buildah bud -f $out/Containerfile -t operon:dev $out"
