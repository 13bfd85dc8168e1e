package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"hxd/internal/hxtest"
)

// S3 test server defaults.
const (
	S3Bucket    = "hxd-test"
	S3AccessKey = "hxdtestaccess"
	S3SecretKey = "hxdtestsecret0123456789"
	S3Region    = "us-east-1"
)

// S3Server is a real S3-compatible server: the pinned versitygw with its
// posix backend, serving a temporary folder over plain HTTP on a free
// loopback port, with one bucket created. It stops with the test.
type S3Server struct {
	// Endpoint is the server's host:port (plain HTTP).
	Endpoint string
	// AccessKey, SecretKey and Region are the root credentials.
	AccessKey, SecretKey, Region string
	// Bucket is the bucket created at start (S3Bucket).
	Bucket string
	// Root is the posix backend's folder: object k of bucket b is the file
	// Root/b/k, which a test may overwrite to corrupt the object.
	Root string
}

// VersityGW returns the path of the pinned versitygw, building it once per
// machine with scripts/build-versitygw.sh (under 2 minutes cold, cached
// under ~/.cache/hxd). HXD_VERSITYGW overrides the path.
func VersityGW() (string, error) {
	return hxtest.PeerBinary("build-versitygw.sh", "HXD_VERSITYGW")
}

// StartS3 starts a versitygw for the test, creates S3Bucket and stops the
// server at cleanup. When versitygw cannot be built or does not start, the
// test is skipped with the reason, except under CI=true, where it fails.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	bin, err := VersityGW()
	if err != nil {
		hxtest.DependencyMissing(t, "hxtest: versitygw unavailable: %v", err)
		return nil
	}
	var lastErr error
	for range 3 { // a free port may be taken between picking and binding
		srv, err := startS3(t, bin)
		if err == nil {
			return srv
		}
		lastErr = err
	}
	hxtest.DependencyMissing(t, "hxtest: versitygw did not start: %v", lastErr)
	return nil
}

func startS3(t testing.TB, bin string) (*S3Server, error) {
	port, err := hxtest.FreePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, err
	}
	srv := &S3Server{
		Endpoint:  net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		AccessKey: S3AccessKey, SecretKey: S3SecretKey, Region: S3Region,
		Bucket: S3Bucket, Root: root,
	}
	cmd := exec.Command(bin,
		"--port", srv.Endpoint,
		"--access", srv.AccessKey, "--secret", srv.SecretKey, "--region", srv.Region,
		"--quiet",
		"posix", root)
	// Only what versitygw needs: no ROOT_ACCESS_KEY or VGW_* from the caller.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	peer, err := hxtest.StartPeer(cmd, dir, "versitygw")
	if err != nil {
		return nil, err
	}

	client, closeClient, err := srv.newClient()
	if err != nil {
		peer.Stop()
		return nil, err
	}
	defer closeClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitS3(ctx, client, srv.Endpoint, srv.Bucket, peer.Exited); err != nil {
		peer.Stop()
		return nil, fmt.Errorf("versitygw on %s: %w\n%s", srv.Endpoint, errors.Join(err, peer.Err()), peer.LogTail())
	}
	t.Cleanup(peer.Stop)
	t.Logf("hxtest: versitygw on %s, bucket %s, folder %s", srv.Endpoint, srv.Bucket, root)
	return srv, nil
}

// waitS3 waits until the server accepts connections, then creates bucket.
func waitS3(ctx context.Context, client *minio.Client, addr, bucket string, exited <-chan struct{}) error {
	for {
		select {
		case <-exited:
			return errors.New("exited early")
		case <-ctx.Done():
			return errors.New("not listening within 30s")
		case <-time.After(50 * time.Millisecond):
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		_ = conn.Close()
		break
	}
	err := client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}

// Client returns a minio client for the server with its own HTTP
// transport, whose idle connections close at the test's cleanup (goleak).
func (s *S3Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	client, closeClient, err := s.newClient()
	if err != nil {
		t.Fatalf("hxtest: s3 client: %v", err)
	}
	t.Cleanup(closeClient)
	return client
}

func (s *S3Server) newClient() (*minio.Client, func(), error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	client, err := minio.New(s.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:    false,
		Region:    s.Region,
		Transport: tr,
	})
	if err != nil {
		return nil, nil, err
	}
	return client, tr.CloseIdleConnections, nil
}

// ObjectPath returns the posix file holding object key of the bucket.
func (s *S3Server) ObjectPath(key string) string {
	return filepath.Join(s.Root, s.Bucket, filepath.FromSlash(key))
}
