package hxtest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// DefaultRedisAddr is the test Redis used when HXD_TEST_REDIS_ADDR is unset.
const DefaultRedisAddr = "127.0.0.1:6379"

// RedisAddr returns the address of the test Redis: HXD_TEST_REDIS_ADDR
// ("host:port" or a redis:// URL), default 127.0.0.1:6379, after checking
// that it answers PING within 2s. When it does not, the test is skipped,
// or fails under CI=true.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("HXD_TEST_REDIS_ADDR")
	if addr == "" {
		addr = DefaultRedisAddr
	}
	hostport := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			t.Fatalf("HXD_TEST_REDIS_ADDR %q: %v", addr, err)
		}
		hostport = u.Host
	}
	if err := pingRedis(hostport); err != nil {
		DependencyMissing(t, "hxtest: test Redis at %s (HXD_TEST_REDIS_ADDR) unreachable: %v", addr, err)
	}
	return addr
}

// pingRedis sends an inline PING and accepts any RESP reply ("+PONG", or
// "-NOAUTH…" from a Redis wanting a password: it is there).
func pingRedis(hostport string) (err error) {
	conn, err := net.DialTimeout("tcp", hostport, 2*time.Second)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close()) }()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line == "" || (line[0] != '+' && line[0] != '-') {
		return &net.OpError{Op: "ping", Net: "tcp", Err: errNotRedis}
	}
	return nil
}

type notRedisError struct{}

func (notRedisError) Error() string { return "not a Redis server (unexpected PING reply)" }

var errNotRedis = notRedisError{}

// RedisKeyPrefix returns a key prefix unique to this test
// ("hxdtest:<random>:"), so that parallel tests and packages sharing the
// test Redis never see each other's keys. Deleting the keys is the test's
// job (hxtest holds no Redis client).
func RedisKeyPrefix(t testing.TB) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "hxdtest:" + hex.EncodeToString(b[:]) + ":"
}

// DependencyMissing skips the test for a missing external dependency, or fails
// it under CI=true, where every dependency must be present.
func DependencyMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: required)", args...)
	}
	t.Skipf(format+" (skipped; CI=true makes this a failure)", args...)
}
