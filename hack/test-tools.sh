#!/usr/bin/env bash
# Programs the tests use besides the runner's own: xmllint (Debian's
# libxml2-utils) validates the JUnit report against tests/schemas/junit.xsd;
# chromium opens the HTML report headless.
# Installs what is missing when it can (root with apt-get), else says what to
# install.
set -euo pipefail
declare -A packages=(
  [libxml2-utils]=xmllint
  [chromium]=chromium
)
missing=()
for p in "${!packages[@]}"; do
  command -v "${packages[$p]}" >/dev/null || missing+=("$p")
done
(( ${#missing[@]} == 0 )) && exit 0
if [[ -n "${DRA_E2E_NO_APT:-}" || $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
  echo "the tests need the Debian packages ${missing[*]}: install them with apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
  echo "apt-get install failed; trying once more after apt-get update" >&2
  apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
}
