#!/usr/bin/env bash
# The system tools some tests drive, from Debian's packages: PgBouncer for the pooler tests
# (tests/pooler.py), Chromium for the UI tests (tests/browser.py), Tesseract for OCR, pandoc
# and LibreOffice to convert the format corpus (testing/ingest_testing/converted/), groff and
# Ghostscript for a man page's PDF. `make test` runs this (so does .ci/run, through it), once:
# the Makefile's stamp is made when nothing is left missing.
#
# What is missing is installed when this run may: root with apt-get, in one apt transaction.
# Elsewhere it only says what is missing; the tests that need it are skipped, and the run ends
# with one line naming them (tests/tools.py). Run it with sudo to install them yourself.
# Exit status: 0 when every tool is there; 3 when some are missing (the suite still runs, and
# skips their tests); under CI (CI set) a failed install fails.
set -euo pipefail

missing=() lean=()  # lean: installed without their recommends (LibreOffice's pull in Java)
need() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ]; }  # pgbouncer: /usr/sbin, off a user's PATH
need pgbouncer || missing+=(pgbouncer)
need chromium || missing+=(chromium)
need tesseract || lean+=(tesseract-ocr tesseract-ocr-eng)
need pandoc || lean+=(pandoc)
need soffice || lean+=(libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui)
need groff || lean+=(groff)
need ps2pdf || lean+=(ghostscript)
wanted=("${missing[@]}" "${lean[@]}")
[ ${#wanted[@]} -gt 0 ] || exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing the system tools the tests use: ${wanted[*]}"
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
  if apt-get update -qq >/dev/null \
     && { [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"; } \
     && { [ ${#lean[@]} -eq 0 ] || apt_install --no-install-recommends "${lean[@]}"; }; then
    exit 0
  fi
  echo "could not install ${wanted[*]}: the tests that need them will be skipped" >&2
  [ -z "${CI:-}" ] || exit 1
else
  echo "not installed: ${wanted[*]} (the tests that need them will be skipped;" \
       "sudo tools/system-tools.sh installs them)"
fi
exit 3
