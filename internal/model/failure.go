package model

// Failure types (Failure.Type) produced by the providers of this package.
// They are stable: they are recorded in model.failed and compared on resume,
// playback and in the Temporal activities.
const (
	// FailureConnection: the server could not be reached or dropped the
	// connection (connection refused, reset, DNS, unexpected EOF). Retryable.
	FailureConnection = "ConnectionError"
	// FailureTimeout: the call exceeded Config.TimeoutSeconds, a transport
	// timeout fired, or the server answered 408. Retryable.
	FailureTimeout = "TimeoutError"
	// FailureRateLimit: HTTP 429 or a "rate limit" message. Retryable; carries
	// RetryAfterSeconds when the server sent Retry-After.
	FailureRateLimit = "RateLimitError"
	// FailureAPIStatus: HTTP 5xx, 409 or an "overloaded" message. Retryable.
	FailureAPIStatus = "APIStatusError"
	// FailureAuthentication: HTTP 401 or 403. Not retryable.
	FailureAuthentication = "AuthenticationError"
	// FailureBadRequest: any other HTTP 4xx. Not retryable.
	FailureBadRequest = "BadRequestError"
	// FailureResponseValidation: a 2xx reply that is not a usable chat
	// completion (not JSON, no choices). Not retryable.
	FailureResponseValidation = "APIResponseValidationError"
	// FailureToolArguments: the reply holds a tool call whose arguments are
	// not a usable JSON object (not JSON, not an object, no canonical form,
	// nested too deep). Retryable: a new sample may be valid. The message
	// names the tool and the call id, never the arguments.
	FailureToolArguments = "ToolArgumentsError"
	// FailureInvalidRequest: the canonical request cannot be converted for
	// the provider (unknown role or block type, invalid tool schema). Not
	// retryable.
	FailureInvalidRequest = "InvalidRequestError"
	// FailureScriptExhausted: a scripted provider was asked for a step beyond
	// its script. Not retryable.
	FailureScriptExhausted = "ScriptExhausted"
	// FailureGeneric is AsFailure's type for errors nobody classified. Not
	// retryable.
	FailureGeneric = "Error"
)
