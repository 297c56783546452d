#!/bin/sh
# A credential plugin as a shell script: prints a v1 ExecCredential whose
# token comes from PLUGIN_SH_TOKEN.
cat <<JSON
{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"${PLUGIN_SH_TOKEN}"}}
JSON
