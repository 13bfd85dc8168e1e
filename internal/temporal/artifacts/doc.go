// Package artifacts stores the Temporal engine's large values
// content-addressed in an S3-compatible bucket (minio-go): object key =
// prefix + lowercase hex SHA-256 of the bytes (REFERENCE §9
// S3ArtifactStore). Get accepts only keys of exactly that shape and
// verifies the SHA-256 of what it reads, stricter than the reference.
//
// Owner index: the artifacts a session's tools return, and tool results
// spilled over the agent's max_result_chars, are readable through the
// HTTP API (GET /artifacts/{sha256}) by the session's owner only. PutOwned
// stores the bytes, then an empty object
//
//	<prefix>owners/<sha256 hex of the bytes>/<sha256 hex of the owner principal>
//
// and GetOwned answers ErrNotFound unless the caller's object exists.
// Keys under <prefix>owners/ (and <prefix>runs/, the run index) never
// collide with artifacts, whose keys have no '/' after the prefix.
// Artifacts written by the payload codec have no owner object: nobody
// reads them through the API.
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
