#!/usr/bin/env bash
# Resolve the JVM jars from Maven Central into a local cache (never committed).
#   spark/ : Delta Lake + Spark's Kafka source, handed to Spark as local paths
#   kafka/ : a Kafka broker's runtime classpath, for tests and the local demo
# Idempotent: a cache whose stamp matches the poms is reused without asking Maven.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${QUARANTINE_JAR_CACHE:-$here/.cache/jars}"
for part in spark kafka; do
  pom="$here/jvm/$part/pom.xml"
  stamp="$(sha256sum "$pom" | cut -c1-16)"
  dest="$cache/$part"
  if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$stamp" ]; then
    continue
  fi
  rm -rf "$dest" && mkdir -p "$dest"
  extra=()
  [ "$part" = spark ] && extra+=(-DexcludeTransitive=true)
  [ "$part" = kafka ] && extra+=(-DincludeScope=runtime)
  if ! mvn -q -B -U -s "$here/jvm/settings.xml" -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dest" "${extra[@]}"; then
    echo "resolve_jars: mvn could not resolve $pom from Maven Central" >&2
    exit 1
  fi
  echo "$stamp" > "$dest/.stamp"
  echo "resolve_jars: $part -> $dest ($(ls "$dest"/*.jar | wc -l) jars)"
done
