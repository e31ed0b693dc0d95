#!/bin/sh
# Regenerate the parts of the docs that paste live tool output (rules.md, findings.md,
# worked-example.md). Run after changing rules or re-recording samples.
set -e
here=$(dirname "$0")
cd "$here/../.."
python docs/tools/gen_rules.py > /dev/null
python docs/tools/gen_findings.py
python docs/tools/gen_worked.py
