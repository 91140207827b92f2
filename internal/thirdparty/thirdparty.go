// Package thirdparty starts fleets of MQTT clients written by others, each
// with its own reconnect, so that a storm test can break the path under
// them as under our own devices. A fleet is one process running n clients
// of one library:
//
//   - paho-mqtt 1.6.1 for Python (StartPahoPython), Debian's
//     python3-paho-mqtt, under /usr/bin/python3 (the pyenv python3 on PATH
//     does not see Debian's packages). Its reconnect: 1, 2, 4 ... s
//     doubling to 120 s (reconnect_delay_set(1, 120)), no jitter.
//   - MQTT.js 5 (StartMQTTJS), npm package mqtt under node. Its reconnect:
//     a constant 1 s (reconnectPeriod 1000), no backoff.
//   - paho.mqtt.golang v1.5.1 (StartPahoGo), the module's own dependency,
//     built from ./pahogofleet with go run. Its reconnect (AutoReconnect,
//     MaxReconnectInterval 10 min): the first attempt after a loss at once,
//     then 1, 2, 4 ... s doubling, no jitter.
//
// With Options.Jitter each of them instead waits U(0, min(Cap, Base·2^n))
// before its n-th reconnect attempt since its last CONNACK 0 (n from 0),
// through a hook each library has; FullJitter is the one the storm tests
// use. The scripts in testdata and pahogofleet/main.go say which hook.
//
// Through the fault proxy to mosquitto, 200 clients each, the broker down
// for 10.5 s (go test -v -run Storms ./internal/thirdparty/, 2026-11-28):
// paho Python's rounds came 1, 3, 7 s after the loss and all 200 back at
// 15.0 s; MQTT.js's every 1.01 s, back at 11.1 s; paho Go's at 0, 1, 3, 7 s,
// back at 15.0 s; each round within 0.1 s. With FullJitter the 200 came back
// from 10.5 s to 36-38 s after the loss, at most 33 in any second.
//
// Every client uses MQTT 3.1.1 (paho Go: the library's default, 3.1.1
// falling back to 3.1 on a failed first connect), a clean session, a 30 s
// keepalive, and publishes and subscribes to nothing. Client IDs are the
// fleet's prefix and the client's index: py-0 ... py-199, js-*, go-*.
//
// # Installing the clients
//
// Debian's package, and MQTT.js outside the repository (make test must
// leave no file in the tree) as testdata/mqttjs's lock file pins it, as
// .ci/run does:
//
//	apt-get install python3-paho-mqtt
//	mkdir -p ~/.cache/herdguard/mqttjs
//	cp internal/thirdparty/testdata/mqttjs/package*.json ~/.cache/herdguard/mqttjs/
//	npm ci --prefix ~/.cache/herdguard/mqttjs
//
// (npm install --prefix ~/.cache/herdguard/mqttjs mqtt@5.16.0 does as well,
// its dependencies unpinned.) HERDGUARD_MQTTJS_DIR names another npm
// prefix, the directory holding node_modules/mqtt. Without a client a test
// is skipped, or fails where HERDGUARD_REQUIRE_THIRDPARTY is set (CI).
//
// # The fleet's process
//
// A fleet process takes a Spec as JSON in its one argument (MQTT.js also the
// mqtt package's directory), writes a line "connected ID" at each CONNACK 0
// and "lost ID" when that session ends, and disconnects its clients and
// exits when its stdin closes.
package thirdparty
