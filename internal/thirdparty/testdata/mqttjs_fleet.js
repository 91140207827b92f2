// A fleet of MQTT.js 5 clients (npm package mqtt) in one node process.
//
// Started by package thirdparty (fleet.go) as
//     node mqttjs_fleet.js SPEC_JSON MQTT_PACKAGE_DIR
// where SPEC_JSON is thirdparty.Spec and MQTT_PACKAGE_DIR is the installed
// node_modules/mqtt. Every client keeps MQTT.js's own reconnect:
// reconnectPeriod 1000 ms, constant, no backoff. A stream's 'close' (or
// _cleanUp) calls _setupReconnect, which starts a timer of
// this.options.reconnectPeriod read there and then (build/lib/client.js
// 239-250, 951-966); the next attempt's connect() clears it. The client's
// own 'close' listener, added in its constructor, runs before any of ours,
// and 'offline' comes only at the first wait of an outage. So with jitter
// in the spec, options.reconnectPeriod always holds the wait for the next
// failure ahead of it: U(0, min(cap, base * 2^n)) for the n-th wait since
// the last CONNACK 0 (n from 0), drawn anew after every 'close' and reset
// on 'connect'. A period of 0 would turn reconnecting off, so a draw is at
// least 1 ms. (A CONNACK refusal ends MQTT.js's reconnecting for good unless
// reconnectOnConnackError is set, handlers/connack.js; it is left unset, as
// MQTT.js ships.)
//
// stdout carries one line an event: "connected ID" at CONNACK 0 and
// "lost ID" when that session ends. The fleet disconnects and exits when
// stdin closes.
'use strict'

const spec = JSON.parse(process.argv[2])
const mqtt = require(process.argv[3])

const version = require(process.argv[3] + '/package.json').version
if (!version.startsWith('5.')) {
  console.error('MQTT.js 5 is required, found ' + version)
  process.exit(2)
}

// mulberry32: a small seeded generator, one a client.
function generator (seed) {
  let a = seed >>> 0
  return function () {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const jitter = spec.jitter_base_ns > 0
const baseMs = spec.jitter_base_ns / 1e6
const capMs = spec.jitter_cap_ns / 1e6
const clients = []
for (let i = 0; i < spec.n; i++) {
  const id = spec.prefix + i
  let n = 0
  const random = generator(Math.imul(spec.seed >>> 0, 0x9E3779B1) ^ Math.imul(i + 1, 0x85EBCA77))
  const draw = () => {
    const ceiling = Math.min(capMs, baseMs * Math.pow(2, Math.min(n, 40)))
    n++
    return Math.max(1, Math.round(random() * ceiling))
  }
  const client = mqtt.connect({
    host: spec.host,
    port: spec.port,
    protocol: 'mqtt',
    clientId: id,
    clean: true,
    keepalive: Math.round(spec.keepalive_ns / 1e9),
    reconnectPeriod: jitter ? draw() : 1000
  })
  let up = false
  client.on('connect', () => {
    up = true
    if (jitter) {
      n = 0
      client.options.reconnectPeriod = draw()
    }
    console.log('connected ' + id)
  })
  client.on('close', () => {
    if (jitter) client.options.reconnectPeriod = draw()
    if (up) {
      up = false
      console.log('lost ' + id)
    }
  })
  client.on('error', () => {}) // refusals and resets: its reconnect deals with them
  clients.push(client)
}

process.stdin.resume()
process.stdin.on('end', () => {
  let left = clients.length
  for (const c of clients) c.end(true, () => { if (--left === 0) process.exit(0) })
  setTimeout(() => process.exit(0), 5000).unref()
})
