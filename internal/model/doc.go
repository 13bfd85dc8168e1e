// Package model owns the provider-neutral side of language-model calls:
//
//   - the canonical, Anthropic-shaped message format (Message, ContentBlock,
//     ToolCall, ToolResult, Request, Response, Usage) that is persisted in the
//     journal and replayed on resume;
//   - the provider adapters behind the Provider interface, built by New from
//     the `model:` section of an agent file: the deterministic scripted
//     provider, the OpenAI Chat Completions provider (any compatible
//     base_url) and the Anthropic Messages provider (streamed, with
//     extended thinking kept as native content blocks);
//   - failure classification: every provider error becomes a *Failure with a
//     stable Type and a Retryable flag (STYLE G10), and Backoff computes the
//     wait before the next attempt. The retry loop itself lives in the
//     runtime, which retries with new attempt numbers; adapters never retry
//     on their own.
//
// API keys are read only through Options.LookupEnvFunc, by the env-var name
// in Config.APIKeyEnv; they are never logged, echoed or put in a Failure.
//
// The package is a leaf of the dependency graph: it must not import
// hxd/internal/runtime, hxd/internal/store, the Temporal SDK or
// hxd/internal/http (nor anything that imports them). Those packages depend
// on model, never the other way round.
package model
