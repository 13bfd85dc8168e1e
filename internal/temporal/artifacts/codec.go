package artifacts

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// Codec constants.
const (
	// Encoding is the metadata "encoding" of a reference payload.
	Encoding = "binary/harness-artifact-v1"
	// DefaultThreshold is the serialized payload size above which a
	// payload becomes an artifact.
	DefaultThreshold = 65536
	// DefaultCodecTimeout bounds one artifact Put or Get of the codec.
	DefaultCodecTimeout = 30 * time.Second
)

// CodecConfig configures a Codec. Zero fields take their defaults.
type CodecConfig struct {
	// Threshold: a payload whose serialized (protobuf) size exceeds it is
	// stored as an artifact. Optional; default: 65536.
	Threshold int
	// Timeout bounds each artifact Put or Get (PayloadCodec has no
	// context). Optional; default: 30s.
	Timeout time.Duration
}

// Codec is a converter.PayloadCodec moving payloads larger than the
// threshold into a Store: Encode replaces such a payload by a reference
// payload (metadata encoding = Encoding, data = the ASCII artifact key of
// the payload's deterministic protobuf serialization); Decode reverses it,
// verifying the artifact's SHA-256. Other payloads pass through unchanged.
// It is safe for concurrent use.
type Codec struct {
	store     *Store
	threshold int
	timeout   time.Duration
}

var _ converter.PayloadCodec = (*Codec)(nil)

// NewCodec returns a Codec storing into store.
func NewCodec(store *Store, cfg CodecConfig) (*Codec, error) {
	if store == nil {
		return nil, errors.New("artifacts: nil store")
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultCodecTimeout
	}
	if cfg.Threshold < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("artifacts: invalid codec config (threshold %d, timeout %s)", cfg.Threshold, cfg.Timeout)
	}
	return &Codec{store: store, threshold: cfg.Threshold, timeout: cfg.Timeout}, nil
}

// NewDataConverter returns the SDK's default data converter wrapped with
// a Codec on store: the converter the Temporal client and worker must use.
func NewDataConverter(store *Store, cfg CodecConfig) (converter.DataConverter, error) {
	codec, err := NewCodec(store, cfg)
	if err != nil {
		return nil, err
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec), nil
}

// Encode stores each payload larger than the threshold and returns its
// reference payload in its place; it does not modify its input.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if p == nil || proto.Size(p) <= c.threshold {
			out[i] = p
			continue
		}
		data, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("artifacts: marshal payload: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		key, err := c.store.Put(ctx, data)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("artifacts: encode payload of %d bytes: %w", len(data), err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding)},
			Data:     []byte(key),
		}
	}
	return out, nil
}

// Decode replaces each reference payload by the payload it names, read
// from the store and checked against its SHA-256; other payloads pass
// through. Errors wrap ErrInvalidKey, ErrNotFound, ErrCorrupt, ErrTooLarge
// or the S3 client's error.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if p == nil || string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		key := string(p.GetData())
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		data, err := c.store.Get(ctx, key)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("artifacts: decode payload: %w", err)
		}
		var decoded commonpb.Payload
		if err := proto.Unmarshal(data, &decoded); err != nil {
			return nil, fmt.Errorf("artifacts: decode payload %s: %w", key, err)
		}
		out[i] = &decoded
	}
	return out, nil
}
