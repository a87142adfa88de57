#!/usr/bin/env bash
# A local single-node Kafka broker (KRaft, 127.0.0.1 only) for the Kafka demo.
#   scripts/kafka_broker.sh start   # start on 127.0.0.1:9092 (controller 9093), create topic "orders"
#   scripts/kafka_broker.sh produce [N]   # N order events (4% poison) to "orders"
#   scripts/kafka_broker.sh status
#   scripts/kafka_broker.sh stop
# Data, logs, config and the pid file live in .cache/kafka-demo/ (KAFKA_DEMO_DIR to change;
# KAFKA_DEMO_PORT for another port). Jars: .cache/jars/kafka (scripts/resolve_jars.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
[ -x "$py" ] || py=python3
dir="${KAFKA_DEMO_DIR:-$here/.cache/kafka-demo}"
port="${KAFKA_DEMO_PORT:-9092}"
action="${1:-}"
kafka() { PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$py" -c 'import sys; from tests.support.kafka import main; sys.exit(main())' "$@"; }
case "$action" in
  start)
    kafka start --dir "$dir" --port "$port" \
      --controller-port "$((port + 1))" --topic orders:2
    ;;
  produce)
    kafka produce --dir "$dir" --port "$port" \
      --controller-port "$((port + 1))" --topic orders --records "${2:-10000}"
    ;;
  stop|status)
    kafka "$action" --dir "$dir" --port "$port" \
      --controller-port "$((port + 1))"
    ;;
  *)
    echo "usage: $0 start|produce [N]|status|stop" >&2
    exit 2
    ;;
esac
