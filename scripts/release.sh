#!/usr/bin/env bash
# Builds the release tarball: pushgate-VERSION-linux-x86_64.tar.gz, with the binary (Swift runtime
# linked in), its resource bundles, the systemd unit, the logrotate snippet, the example
# configuration, INSTALL, the licences of the packages linked in (licenses/), and LICENSE once the
# repository has one.
#
#   scripts/release.sh            # writes .build-release/dist/pushgate-VERSION-linux-x86_64.tar.gz
#   PUSHGATE_DIST=DIR scripts/release.sh
#
# It builds in .build-release, not .build: its flags (static Swift runtime, the commit) differ from a
# plain `swift build -c release` (scripts/bench-gateway.sh), which would otherwise rebuild everything
# each time the other ran, and a debug build or `swift test` can run beside it.
# The tarball's path is the last line printed on standard output. The commit is taken from git
# (PUSHGATE_COMMIT overrides it, for a build where git cannot see the repository); a tree with
# uncommitted changes gets "-dirty" after it. Only the pushgate product is built: ~14 minutes of two
# cores from nothing, much less when .build/release is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/.*static let version = "\([^"]*\)".*/\1/p' Sources/PushgateCore/Support/BuildInfo.swift)
[ -n "$version" ] || { echo "release.sh: no version in Sources/PushgateCore/Support/BuildInfo.swift" >&2; exit 1; }

commit=${PUSHGATE_COMMIT:-}
if [ -z "$commit" ]; then
    if commit=$(git rev-parse --short=12 HEAD 2>/dev/null); then
        # Untracked files do not count: .build and the generated file below are ignored anyway.
        git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
    else
        commit=unknown
    fi
fi
case "$commit" in
*[!0-9a-zA-Z.-]*) echo "release.sh: PUSHGATE_COMMIT must be letters, digits, '.' or '-': $commit" >&2; exit 1 ;;
esac

# The commit reaches the binary through a generated file that exists only during the build (it is in
# .gitignore, and removed on exit whatever happens), so the working tree stays as it was.
generated=Sources/pushgate/BuildCommit.generated.swift
trap 'rm -f "$generated"' EXIT
cat >"$generated" <<EOF
// Written by scripts/release.sh for one build; not in git.
let generatedBuildCommit = "$commit"
EOF

scratch=.build-release
build=(swift build -c release --static-swift-stdlib --product pushgate --scratch-path "$scratch" -Xswiftc -DPUSHGATE_BUILD_COMMIT)
echo "release.sh: pushgate $version (commit $commit): ${build[*]}" >&2
"${build[@]}" >&2
bin=$("${build[@]}" --show-bin-path)
rm -f "$generated"

# What the binary needs from the system: glibc, the C++ and GCC runtimes and zlib (all in every Debian
# base system, debootstrap's minbase included) and SQLite (libsqlite3-0, the one package to install).
# Anything else means the build changed what a server must have: stop here rather than ship it.
libraries=$(ldd "$bin/pushgate" | awk '{print $1}' | sed 's,^.*/,,' | sort -u)
unexpected=$(printf '%s\n' "$libraries" | grep -Ev '^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|lib(c|m|dl|pthread|rt|util|resolv)\.so\.[0-9]+|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libz\.so\.1|libsqlite3\.so\.0)$' || true)
if [ -n "$unexpected" ]; then
    echo "release.sh: the binary needs libraries outside Debian's base and libsqlite3:" >&2
    printf '  %s\n' $unexpected >&2
    exit 1
fi

name=pushgate-$version-linux-x86_64
dist=${PUSHGATE_DIST:-$scratch/dist}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
stage=$(mktemp -d)
trap 'rm -f "$generated"; rm -rf "$stage"' EXIT
root=$stage/$name
mkdir -p "$root/bin"
cp "$bin/pushgate" "$root/bin/"
# DWARF out (most of the size), symbols kept: a crash's backtrace still names the functions.
strip --strip-debug "$root/bin/pushgate"
# The resource bundles (the OpenAPI document of PushgateHTTP): Foundation looks for them in the folder of
# the running binary (/proc/self/exe, so a symbolic link to the binary finds them too).
for bundle in "$bin"/*.resources; do
    [ -d "$bundle" ] && cp -R "$bundle" "$root/bin/"
done
[ -f "$root/bin/pushgate_PushgateHTTP.resources/openapi.yaml" ] \
    || { echo "release.sh: the OpenAPI document is missing from $bin" >&2; exit 1; }
cp examples/pushgate.service examples/pushgate.logrotate INSTALL "$root/"
cp examples/pushgate.yaml "$root/pushgate.yaml.example"
if [ -f LICENSE ]; then
    cp LICENSE "$root/"
else
    echo "release.sh: warning: the repository has no LICENSE file; the tarball ships without one" >&2
fi
# The packages linked into the binary are redistributed with it: their licences and NOTICE files
# (Apache-2.0 section 4, MIT, BSD) go in the tarball, one folder per package as resolved for this build.
mkdir -p "$root/licenses"
for checkout in "$scratch"/checkouts/*/; do
    package=$(basename "$checkout")
    found=0
    while IFS= read -r file; do
        relative=${file#"$checkout"}
        mkdir -p "$root/licenses/$package/$(dirname "$relative")"
        cp "$file" "$root/licenses/$package/$relative"
        found=1
    done < <(find "$checkout" -path "$checkout.git" -prune -o -path '*/Tests/*' -prune -o -type f \
        \( -iname 'LICENSE*' -o -iname 'NOTICE*' -o -iname 'COPYING*' \) -print | sort)
    [ "$found" = 1 ] || { echo "release.sh: $package has no licence file in $checkout" >&2; exit 1; }
done
printf 'pushgate %s (commit %s)\n\nldd bin/pushgate:\n%s\n' "$version" "$commit" "$(ldd "$bin/pushgate")" >"$root/BUILD"

tarball=$dist/$name.tar.gz
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$tarball.tmp" "$name"
mv "$tarball.tmp" "$tarball"
echo "release.sh: $(du -h "$tarball" | cut -f1) $tarball" >&2
echo "$tarball"
