#!/usr/bin/env bash
# Makes the virtual environments with the library versions the capture tests' traces come from,
# and writes crates/casebook-formats/tests/data/capture/<library>-<version>.jsonl with gen.py.
# Usage: scripts/gen-traces/gen.sh VENV_DIR   (two environments are made under VENV_DIR: OpenLLMetry's
# `opentelemetry-instrumentation-openai` and the other libraries' cannot share one.)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../crates/casebook-formats/tests/data/capture"
venvs=${1:?usage: gen.sh VENV_DIR}
mkdir -p "$out" "$venvs"
common=(openai==3.57.0 opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2 httpx)
if [ ! -x "$venvs/main/bin/python" ]; then
  python3 -m venv "$venvs/main"
  # opentelemetry-instrumentation-openai-v2 2.4b0 imports a module opentelemetry-util-genai 1.2 removed.
  "$venvs/main/bin/pip" install --quiet "${common[@]}" \
    openinference-instrumentation-openai==0.1.66 \
    opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==1.1b0 \
    'pydantic-ai-slim[openai]==2.68.0' \
    openai-agents==0.24.0 openinference-instrumentation-openai-agents==2.6.0
fi
if [ ! -x "$venvs/openllmetry/bin/python" ]; then
  python3 -m venv "$venvs/openllmetry"
  "$venvs/openllmetry/bin/pip" install --quiet "${common[@]}" opentelemetry-instrumentation-openai==0.62.4
fi
py="$venvs/main/bin/python"
"$py" "$here/gen.py" openinference-openai "$out/openinference-openai-0.1.66.jsonl"
"$py" "$here/gen.py" otel-openai-v2 "$out/opentelemetry-openai-v2-2.4b0.jsonl"
"$venvs/openllmetry/bin/python" "$here/gen.py" openllmetry-openai "$out/openllmetry-openai-0.62.4.jsonl"
"$py" "$here/gen.py" pydantic-ai-v5 "$out/pydantic-ai-2.68.0-v5.jsonl"
"$py" "$here/gen.py" pydantic-ai-v2 "$out/pydantic-ai-2.68.0-v2.jsonl"
"$py" "$here/gen.py" openai-agents "$out/openai-agents-0.24.0-openinference-2.6.0.jsonl"
