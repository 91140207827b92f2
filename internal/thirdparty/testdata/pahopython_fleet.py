"""A fleet of paho-mqtt 1.6.1 clients (Debian's python3-paho-mqtt) in one process.

Started by package thirdparty (fleet.go) as
    /usr/bin/python3 pahopython_fleet.py SPEC_JSON
where SPEC_JSON is thirdparty.Spec. Every client runs paho's own network
thread (connect_async + loop_start, so loop_forever with
retry_first_connection) and paho's own reconnect: reconnect_delay_set(1, 120),
waits of 1, 2, 4 ... s doubling to 120 s, no jitter (client.py
_reconnect_wait). With jitter in the spec each wait is instead
U(0, d), d being the wait paho would have taken: reconnect_delay_set(base, cap)
and the same doubling and reset (CONNACK 0 sets _reconnect_delay to None).

stdout carries one line an event: "connected ID" at CONNACK 0 and "lost ID"
when that session ends. The fleet disconnects and exits when stdin closes.
"""

import json
import random
import sys
import threading
import time

import paho.mqtt
import paho.mqtt.client as mqtt

out_lock = threading.Lock()


def say(line):
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class JitteredClient(mqtt.Client):
    """paho's Client whose reconnect waits U(0, d) for paho's own d."""

    def __init__(self, rng, **kw):
        super().__init__(**kw)
        self._herdguard_rng = rng

    # paho-mqtt 1.6.1 client.py _reconnect_wait, with the wait drawn
    # uniformly below paho's delay.
    def _reconnect_wait(self):
        now = time.monotonic()
        with self._reconnect_delay_mutex:
            if self._reconnect_delay is None:
                self._reconnect_delay = self._reconnect_min_delay
            else:
                self._reconnect_delay = min(
                    self._reconnect_delay * 2,
                    self._reconnect_max_delay,
                )
            target_time = now + self._herdguard_rng.uniform(0, self._reconnect_delay)

        remaining = target_time - now
        while (self._state != mqtt.mqtt_cs_disconnecting
                and not self._thread_terminate
                and remaining > 0):
            time.sleep(min(remaining, 1))
            remaining = target_time - time.monotonic()


def main():
    spec = json.loads(sys.argv[1])
    if not paho.mqtt.__version__.startswith("1.6."):
        sys.exit("paho-mqtt 1.6.x is required, found " + paho.mqtt.__version__)
    jitter = spec["jitter_base_ns"] > 0
    clients = []
    for i in range(spec["n"]):
        cid = spec["prefix"] + str(i)
        if jitter:
            c = JitteredClient(random.Random("%d/%d" % (spec["seed"], i)),
                               client_id=cid, clean_session=True)
            c.reconnect_delay_set(spec["jitter_base_ns"] / 1e9, spec["jitter_cap_ns"] / 1e9)
        else:
            c = mqtt.Client(client_id=cid, clean_session=True)
            c.reconnect_delay_set(1, 120)
        c.user_data_set({"id": cid, "up": False})

        def on_connect(client, ud, flags, rc):
            if rc == 0:
                ud["up"] = True
                say("connected " + ud["id"])

        def on_disconnect(client, ud, rc):
            if ud["up"]:
                ud["up"] = False
                say("lost " + ud["id"])

        c.on_connect = on_connect
        c.on_disconnect = on_disconnect
        c.connect_async(spec["host"], spec["port"], keepalive=round(spec["keepalive_ns"] / 1e9))
        c.loop_start()
        clients.append(c)

    sys.stdin.read()  # until the test closes it
    for c in clients:
        c.disconnect()
    for c in clients:
        c.loop_stop()


if __name__ == "__main__":
    main()
