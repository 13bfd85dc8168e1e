// Package artifacts stores the Temporal engine's large values
// content-addressed in an S3-compatible bucket (minio-go): object key =
// prefix + lowercase hex SHA-256 of the bytes (REFERENCE §9
// S3ArtifactStore). Get accepts only keys of exactly that shape and
// verifies the SHA-256 of what it reads, stricter than the reference.
//
// Codec is the Temporal payload codec (REFERENCE §9 ArtifactCodec): a
// payload whose serialized size exceeds a threshold (default 65,536 bytes)
// is stored as an artifact and replaced by a reference payload (metadata
// encoding "binary/harness-artifact-v1", data = the ASCII key);
// NewDataConverter wraps the SDK's default converter with it.
//
// It imports the Temporal SDK's converter, the Temporal API's payload type
// and minio-go only; it must never import internal/http, store/* or
// runtime.
package artifacts
