#!/usr/bin/env bash
# Make sure the brokers that the publish module's tests talk to answer: NATS with JetStream on
# 127.0.0.1:4222 and RabbitMQ on 127.0.0.1:5672 (guest/guest). Either one that does not answer is
# started with the machine's own commands, then waited for (bounded). One that answers is left
# exactly as it is: never stopped, restarted or reconfigured.
set -euo pipefail

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # NAME PORT SECONDS
  local deadline=$((SECONDS + $3))
  until answers "$2"; do
    if ((SECONDS >= deadline)); then
      echo "$1 does not answer on 127.0.0.1:$2 after $3s; see its log" >&2
      return 1
    fi
    sleep 1
  done
  echo "$1 answers on 127.0.0.1:$2" >&2
}

if ! answers 4222; then
  echo "NATS does not answer on 127.0.0.1:4222: starting nats-server with JetStream" >&2
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for NATS 4222 30
fi

if ! answers 5672; then
  echo "RabbitMQ does not answer on 127.0.0.1:5672: starting rabbitmq-server" >&2
  rabbitmq-server -detached
  wait_for RabbitMQ 5672 120
fi
