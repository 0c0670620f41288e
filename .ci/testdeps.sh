#!/usr/bin/env bash
# The programs the tests need beyond Go and gcc, in one place for .ci/run and
# the GitHub workflow: each is installed from Debian's (or Ubuntu's) packages
# when absent and apt-get can run, and for each one present the matching
# ACCELKIT_REQUIRE_* variable is set, so its tests fail instead of skipping.
#
#   source .ci/testdeps.sh            # .ci/run: exports the variables
#   bash .ci/testdeps.sh --github-env # a workflow step: appends them to
#                                     # $GITHUB_ENV for the later steps
#
# chromium renders accbench's report (bench/report; Google Chrome, which
# GitHub's Ubuntu runners ship, serves too: Ubuntu's chromium package is a
# snap stub), python3 loads devalloc's pickle snapshots, node runs PyTorch's
# memory viewer code over them, redis-server and redis-cli serve
# progcache/redistier's tests, and shellcheck checks the workflows' scripts
# through actionlint.

testdeps_have() {
  local name
  for name in "$@"; do
    command -v "$name" >/dev/null 2>&1 && return 0
  done
  return 1
}

testdeps_updated=
testdeps_install() { # package...
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    # GitHub's runners run steps as a user with password-less sudo.
    sudo=(sudo -n)
  fi
  if ! command -v apt-get >/dev/null 2>&1 || ! "${sudo[@]}" true 2>/dev/null; then
    echo "testdeps: cannot install $* (needs apt-get and root or sudo); its tests will skip" >&2
    return 0
  fi
  if [ -z "$testdeps_updated" ]; then
    "${sudo[@]}" apt-get update -qq
    testdeps_updated=1
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

testdeps_vars=()
testdeps_need() { # VAR package program...
  local var=$1 pkg=$2
  shift 2
  testdeps_have "$@" || testdeps_install "$pkg"
  if testdeps_have "$@"; then
    testdeps_vars+=("$var=1")
  fi
}

testdeps_need ACCELKIT_REQUIRE_CHROMIUM chromium chromium chromium-browser google-chrome
testdeps_need ACCELKIT_REQUIRE_PYTHON python3 python3
testdeps_need ACCELKIT_REQUIRE_NODE nodejs node
# Both programs: the cluster tests need redis-cli beside the server.
if ! testdeps_have redis-server || ! testdeps_have redis-cli; then
  testdeps_install redis-server
fi
if testdeps_have redis-server && testdeps_have redis-cli; then
  testdeps_vars+=(ACCELKIT_REQUIRE_REDIS=1)
fi
testdeps_need ACCELKIT_REQUIRE_SHELLCHECK shellcheck shellcheck

if [ "${1:-}" = --github-env ]; then
  if [ "${#testdeps_vars[@]}" -gt 0 ]; then
    printf '%s\n' "${testdeps_vars[@]}" >>"$GITHUB_ENV"
  fi
else
  for v in "${testdeps_vars[@]}"; do
    export "${v?}"
  done
fi
printf 'testdeps: %s\n' "${testdeps_vars[*]:-none required}" >&2
