package artifacts

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

func payloadOfSize(t *testing.T, size int) *commonpb.Payload {
	t.Helper()
	p := &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
	}
	for n := size - proto.Size(p); n >= 0; n-- { // the length prefix grows with n
		p.Data = []byte(strings.Repeat("x", n))
		if proto.Size(p) == size {
			return p
		}
	}
	t.Fatalf("no payload of %d bytes", size)
	return nil
}

// TestCodec runs the codec cases against one versitygw.
func TestCodec(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{})
	codec, err := NewCodec(tb.store, CodecConfig{})
	require.NoError(t, err)

	t.Run("at threshold passes through", func(t *testing.T) {
		t.Parallel()
		small := payloadOfSize(t, 100)
		edge := payloadOfSize(t, DefaultThreshold)
		in := []*commonpb.Payload{small, edge}
		out, err := codec.Encode(in)
		require.NoError(t, err)
		require.Len(t, out, 2)
		require.Same(t, small, out[0])
		require.Same(t, edge, out[1])
		back, err := codec.Decode(out)
		require.NoError(t, err)
		require.Same(t, small, back[0])
		require.Same(t, edge, back[1])
	})

	t.Run("large becomes artifact", func(t *testing.T) {
		t.Parallel()
		large := payloadOfSize(t, DefaultThreshold+1)
		small := payloadOfSize(t, 100)
		orig := proto.Clone(large).(*commonpb.Payload)
		out, err := codec.Encode([]*commonpb.Payload{small, large})
		require.NoError(t, err)
		require.True(t, proto.Equal(orig, large), "input not mutated")
		require.Same(t, small, out[0])
		ref := out[1]
		require.Equal(t, map[string][]byte{"encoding": []byte("binary/harness-artifact-v1")}, ref.Metadata)
		key := string(ref.Data)
		require.NoError(t, tb.store.ValidateKey(key), "data is the ASCII key")
		serialized, err := proto.MarshalOptions{Deterministic: true}.Marshal(large)
		require.NoError(t, err)
		require.Equal(t, tb.store.Key(serialized), key, "content-addressed serialized payload")
		_, err = os.Stat(tb.srv.ObjectPath(key))
		require.NoError(t, err, "artifact in the bucket")

		back, err := codec.Decode(out)
		require.NoError(t, err)
		require.Same(t, small, back[0])
		require.True(t, proto.Equal(large, back[1]), "byte-identical payload")
		got, err := proto.MarshalOptions{Deterministic: true}.Marshal(back[1])
		require.NoError(t, err)
		require.Equal(t, serialized, got)

		again, err := codec.Encode([]*commonpb.Payload{large})
		require.NoError(t, err)
		require.Equal(t, ref.Data, again[0].Data, "deterministic key")
	})

	t.Run("unknown key", func(t *testing.T) {
		t.Parallel()
		ref := &commonpb.Payload{
			Metadata: map[string][]byte{"encoding": []byte(Encoding)},
			Data:     []byte(tb.store.Key([]byte("never stored"))),
		}
		_, err := codec.Decode([]*commonpb.Payload{ref})
		require.ErrorIs(t, err, ErrNotFound)
	})

	t.Run("invalid key", func(t *testing.T) {
		t.Parallel()
		ref := &commonpb.Payload{
			Metadata: map[string][]byte{"encoding": []byte(Encoding)},
			Data:     []byte("harness-x/../../etc/passwd"),
		}
		_, err := codec.Decode([]*commonpb.Payload{ref})
		require.ErrorIs(t, err, ErrInvalidKey)
	})

	t.Run("corrupted artifact", func(t *testing.T) {
		t.Parallel()
		large := payloadOfSize(t, DefaultThreshold+500)
		out, err := codec.Encode([]*commonpb.Payload{large})
		require.NoError(t, err)
		path := tb.srv.ObjectPath(string(out[0].Data))
		onDisk, err := os.ReadFile(path)
		require.NoError(t, err)
		onDisk[len(onDisk)-1] ^= 1
		require.NoError(t, os.WriteFile(path, onDisk, 0o644))
		_, err = codec.Decode(out)
		require.ErrorIs(t, err, ErrCorrupt)
	})

	t.Run("configured threshold", func(t *testing.T) {
		t.Parallel()
		tiny, err := NewCodec(tb.store, CodecConfig{Threshold: 64})
		require.NoError(t, err)
		p := payloadOfSize(t, 65)
		out, err := tiny.Encode([]*commonpb.Payload{p, payloadOfSize(t, 64)})
		require.NoError(t, err)
		require.Equal(t, Encoding, string(out[0].Metadata["encoding"]))
		require.NotEqual(t, Encoding, string(out[1].Metadata["encoding"]))
		back, err := codec.Decode(out) // any codec on the store decodes
		require.NoError(t, err)
		require.True(t, proto.Equal(p, back[0]))
	})

	t.Run("data converter", func(t *testing.T) {
		t.Parallel()
		dc, err := NewDataConverter(tb.store, CodecConfig{})
		require.NoError(t, err)
		big := strings.Repeat("large activity result ", 5000)
		payloads, err := dc.ToPayloads(big, 42)
		require.NoError(t, err)
		require.Equal(t, Encoding, string(payloads.Payloads[0].Metadata["encoding"]))
		require.Less(t, proto.Size(payloads.Payloads[0]), 200)
		require.Equal(t, "json/plain", string(payloads.Payloads[1].Metadata["encoding"]))
		var s string
		var n int
		require.NoError(t, dc.FromPayloads(payloads, &s, &n))
		require.Equal(t, big, s)
		require.Equal(t, 42, n)
	})

	t.Run("config", func(t *testing.T) {
		t.Parallel()
		_, err := NewCodec(nil, CodecConfig{})
		require.Error(t, err)
		_, err = NewCodec(tb.store, CodecConfig{Threshold: -1})
		require.Error(t, err)
		_, err = NewDataConverter(tb.store, CodecConfig{Timeout: -1})
		require.Error(t, err)
	})
}
