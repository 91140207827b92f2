package transport

import (
	"fmt"
	"strings"
	"sync"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// boundedStore is paho v1's memory store with a bound on what it keeps of
// the broker's messages. paho stores each incoming QoS 1 or 2 PUBLISH
// before it routes it, until it is acknowledged (QoS 1) or released by a
// PUBREL (QoS 2). The agent acknowledges every message once handled, and
// its queue holds back the rest. So an honest broker never leaves more than
// the queue and the few packets on their way to it. Past the bound, the
// broker is keeping messages unacknowledged that the agent did not ask to
// hold. The store keeps no more, and over calls over, which ends the
// connection.
type boundedStore struct {
	*paho.MemoryStore
	maxCount, maxBytes int
	over               func(reason string)

	mu    sync.Mutex
	open  bool           // as paho's: a closed store changes nothing
	sizes map[string]int // the incoming messages kept, by key
	bytes int
}

// inboundKey is how paho names an incoming message in its store.
const inboundKey = "i."

// storeSlack is the messages that may be on their way to the agent's queue
// besides those it holds: one in each of paho's reading, routing and
// acknowledging goroutines, and some to spare.
const storeSlack = 8

func newBoundedStore(s *Settings, over func(reason string)) *boundedStore {
	return &boundedStore{MemoryStore: paho.NewMemoryStore(), over: over, sizes: map[string]int{},
		maxCount: s.IncomingQueue + storeSlack, maxBytes: s.IncomingQueueBytes + storeSlack*s.MaxIncomingPacket}
}

func (b *boundedStore) Put(key string, m packets.ControlPacket) {
	if !strings.HasPrefix(key, inboundKey) {
		b.MemoryStore.Put(key, m)
		return
	}
	size := 0
	if p, ok := m.(*packets.PublishPacket); ok {
		size = len(p.TopicName) + len(p.Payload)
	}
	b.mu.Lock()
	if !b.open {
		b.mu.Unlock()
		b.MemoryStore.Put(key, m) // paho's own complaint
		return
	}
	old, replaced := b.sizes[key]
	count, bytes := len(b.sizes), b.bytes-old+size
	if !replaced {
		count++
	}
	fits := count <= b.maxCount && bytes <= b.maxBytes
	if fits {
		b.sizes[key], b.bytes = size, bytes
	}
	b.mu.Unlock()
	if !fits {
		b.over(fmt.Sprintf("%d incoming messages (%d bytes) left unacknowledged, over the %d (%d bytes) the device holds",
			count, bytes, b.maxCount, b.maxBytes))
		return
	}
	b.MemoryStore.Put(key, m)
}

func (b *boundedStore) Open() {
	b.mu.Lock()
	b.open = true
	b.mu.Unlock()
	b.MemoryStore.Open()
}

func (b *boundedStore) Del(key string) {
	b.mu.Lock()
	if size, ok := b.sizes[key]; ok && b.open {
		delete(b.sizes, key)
		b.bytes -= size
	}
	b.mu.Unlock()
	b.MemoryStore.Del(key)
}

// Reset empties even a closed store, as paho's does.
func (b *boundedStore) Reset() {
	b.mu.Lock()
	clear(b.sizes)
	b.bytes = 0
	b.mu.Unlock()
	b.MemoryStore.Reset()
}

// Close keeps what is stored: a persistent session resends it.
func (b *boundedStore) Close() {
	b.mu.Lock()
	b.open = false
	b.mu.Unlock()
	b.MemoryStore.Close()
}
