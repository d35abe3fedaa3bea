#!/bin/bash
# TEST STAND-IN for mokutil (never in a role). A container has no EFI variables, so the real
# mokutil cannot queue a Machine Owner Key; prepare.yml installs this script as
# /usr/local/sbin/mokutil (ahead of /usr/bin on PATH) on the Secure Boot Debian node. It answers
# the calls the nvidia_driver role makes the way mokutil 0.6 does, keeps the "firmware" state in
# $STATE (enrolled/ and pending/ certificates, by SHA-1 fingerprint), and records every call in
# $STATE/calls.log and every queued certificate in $STATE/imports.log for the verify step.
set -euo pipefail
STATE=/var/lib/mokutil-standin
mkdir -p "$STATE/enrolled" "$STATE/pending"
printf '%s\n' "$*" >> "$STATE/calls.log"

fingerprint() {  # SHA-1 fingerprint of a DER certificate, as mokutil prints it: lower-case, colons
  openssl x509 -inform DER -in "$1" -noout -fingerprint -sha1 | sed 's/^.*=//' | tr 'A-F' 'a-f'
}

case "${1:-}" in
  --sb-state)
    echo "SecureBoot enabled"
    ;;
  --test-key | -t)
    fp=$(fingerprint "$2")
    if [ -f "$STATE/enrolled/$fp.der" ]; then
      echo "$2 is already enrolled"
      exit 1
    fi
    echo "$2 is not enrolled"
    ;;
  --list-new)
    n=0
    for cert in "$STATE"/pending/*.der; do
      [ -e "$cert" ] || continue
      n=$((n + 1))
      printf '[key %d]\nSHA1 Fingerprint: %s\n' "$n" "$(fingerprint "$cert")"
      openssl x509 -inform DER -in "$cert" -noout -subject
    done
    [ "$n" -gt 0 ] || echo "MokNew is empty"
    ;;
  --import | -i)
    cert=$2
    if ! openssl x509 -inform DER -in "$cert" -noout 2>/dev/null; then
      echo "Abort!!! $cert is not a valid x509 certificate in DER format" >&2
      exit 255
    fi
    fp=$(fingerprint "$cert")
    if [ -f "$STATE/pending/$fp.der" ]; then
      echo "SKIP: $cert is already in the enrollment request"
      exit 0
    fi
    # mokutil asks for the one-time enrollment password twice (read from stdin when it is not a terminal).
    echo "input password: "
    IFS= read -r password || password=""
    echo "input password again: "
    IFS= read -r again || again=""
    if [ -z "$password" ] || [ "$password" != "$again" ]; then
      echo "Password doesn't match" >&2
      exit 255
    fi
    cp "$cert" "$STATE/pending/$fp.der"
    printf '%s %s password-given\n' "$fp" "$(openssl x509 -inform DER -in "$cert" -noout -subject)" >> "$STATE/imports.log"
    ;;
  *)
    echo "TEST STAND-IN mokutil: $* is not implemented" >&2
    exit 2
    ;;
esac
