package boltcheck_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/herdguard/herdguard/publisher/internal/boltcheck"
)

// boltFile writes a bbolt file with a bucket "a" of n keys (spilling onto
// branch pages past a few hundred) holding an inline bucket "b" of one key,
// and returns its bytes.
func boltFile(t *testing.T, n int) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		a, err := tx.CreateBucket([]byte("a"))
		if err != nil {
			return err
		}
		for i := range n {
			if err := a.Put(fmt.Appendf(nil, "key-%05d", i), bytes.Repeat([]byte{'v'}, 100)); err != nil {
				return err
			}
		}
		b, err := a.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("inner"), []byte("value"))
	}))
	require.NoError(t, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

func TestCheckVisitsEveryKeyInOrder(t *testing.T) {
	data := boltFile(t, 1000)
	var visited []string
	res, err := boltcheck.Check(bytes.NewReader(data), int64(len(data)), func(path []string, key, value []byte, bucket bool) error {
		visited = append(visited, fmt.Sprintf("%s/%s %v", strings.Join(path, "/"), key, bucket))
		return nil
	})
	require.NoError(t, err)
	assert.False(t, res.MetaFallback)
	require.Len(t, visited, 1+1000+1+1)
	assert.Equal(t, "/a true", visited[0])
	assert.Equal(t, "a/b true", visited[1], "keys in order: b before key-...")
	assert.Equal(t, "a/b/inner false", visited[2], "an inline bucket's keys after its entry")
	assert.Equal(t, "a/key-00000 false", visited[3])
	assert.Equal(t, "a/key-00999 false", visited[1002])

	res, err = boltcheck.Check(bytes.NewReader(nil), 0, nil)
	assert.NoError(t, err, "an empty file: bbolt writes its first pages")
	assert.Zero(t, res)
}

func TestCheckRefusesDamageAndReturnsWhatVisitSays(t *testing.T) {
	data := boltFile(t, 1000)
	visit := func([]string, []byte, []byte, bool) error { return nil }
	var dmg *boltcheck.DamageError

	_, err := boltcheck.Check(bytes.NewReader(data[:len(data)/2]), int64(len(data)/2), visit)
	assert.ErrorAs(t, err, &dmg, "a file cut in half")

	// Every page header overwritten in turn: a page in use is refused as
	// damaged, a free one is never read.
	pageSize, refused := os.Getpagesize(), 0
	for page := 2; page*pageSize < len(data); page++ {
		damaged := bytes.Clone(data)
		copy(damaged[page*pageSize:], bytes.Repeat([]byte{0xff}, 16))
		if _, err := boltcheck.Check(bytes.NewReader(damaged), int64(len(damaged)), visit); err != nil {
			assert.ErrorAs(t, err, &dmg, "page %d", page)
			refused++
		}
	}
	assert.Greater(t, refused, 30, "1,000 keys of 100 bytes fill more than 30 pages")

	refuse := errors.New("not this key")
	_, err = boltcheck.Check(bytes.NewReader(data), int64(len(data)), func(_ []string, key, _ []byte, _ bool) error {
		if string(key) == "key-00500" {
			return refuse
		}
		return nil
	})
	assert.ErrorIs(t, err, refuse)
}
