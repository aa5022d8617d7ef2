//! The retry policy: the decision a client takes after each attempt, from the stream's
//! [`Outcome`] and what the request is ([`RequestTraits`]: idempotent? carries a request key?).
//! The rules are in the [`RetryDecision`](crate::client::RetryDecision) module.
//!
//! The tests are beside it (`retry/tests.rs`).

use crate::event::AbortCode;
use crate::ids::RequestKey;
use crate::outcome::{Outcome, Verdict};

use super::{RetryDecision, RetryReason};

/// Key under a JSON-RPC error's `data` where a deduplicating server describes a refusal
/// (SPEC.md §17.9): `{"reason": "...", "retryable": bool, "requestKey": "...", "retryAfterMs": n}`.
pub(crate) const DEDUPE_DATA_KEY: &str = "io.github.mcp-framing/dedupe";

/// The reason and retryability of a JSON-RPC error object that carries a deduplication refusal
/// (SPEC.md §17.9), read back on the client side: `None` when the error is not one. A retryable
/// refusal (`in_progress`, `store_unavailable`) may be retried with the same key; a final one
/// (`key_conflict`, `result_not_stored`, `outcome_unknown`, `lease_lost`) may not.
#[must_use]
pub(crate) fn dedupe_refusal(error: &serde_json::Value) -> Option<(&str, bool)> {
    let data = error.get("data")?.get(DEDUPE_DATA_KEY)?;
    Some((
        data.get("reason")?.as_str()?,
        data.get("retryable")?.as_bool()?,
    ))
}

/// What the request is, as far as repeating it goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct RequestTraits {
    /// Repeating the request has no further effect (e.g. a read-only tool, a list request).
    pub(crate) is_idempotent: bool,
    /// The request key the request carries, reused on every retry (SPEC.md §10).
    pub(crate) request_key: Option<RequestKey>,
}

// The client engine builds the traits from the request (client/engine.rs); these shorthands are
// the tests'.
#[cfg(test)]
impl RequestTraits {
    /// An idempotent request without a key.
    #[must_use]
    pub(crate) fn idempotent() -> Self {
        Self {
            is_idempotent: true,
            request_key: None,
        }
    }

    /// A request (not known to be idempotent) that carries `key`.
    #[must_use]
    pub(crate) fn keyed(key: RequestKey) -> Self {
        Self {
            is_idempotent: false,
            request_key: Some(key),
        }
    }
}

/// The retry rules (SPEC.md §11.6). The default never retries an ambiguous close. An ABORT is
/// decided by its code (SPEC.md §3.1): a transient one follows the abandoned rule, a
/// deterministic one is final.
///
/// | verdict | idempotent | keyed (server deduplicates) | neither (or keyed, no deduplication) |
/// |---|---|---|---|
/// | clean | do not retry | do not retry | do not retry |
/// | abandoned, corrupt, spliced, cross-wired | retry | retry | surface |
/// | aborted: overloaded or shutting down (3), upstream failed (4) | retry | retry | surface |
/// | aborted: internal error (1), message too large (5) | do not retry | do not retry | do not retry |
/// | aborted: cancelled (2) | do not retry | do not retry | do not retry |
/// | aborted: unspecified (0) or a reserved code | surface | surface | surface |
/// | contract violation | do not retry | do not retry | do not retry |
/// | ambiguous | surface (retry if opted in) | surface | surface |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    retry_ambiguous_if_idempotent: bool,
    server_deduplicates: bool,
}

impl RetryPolicy {
    /// Whether the server deduplicates keyed requests (default `false`): only then is a keyed,
    /// non-idempotent request retried (SPEC.md §17.11, §17.13). Set it from the discovery
    /// contract ([`for_method`](Self::for_method)), never by assumption.
    #[must_use]
    pub(crate) fn server_deduplicates(mut self, deduplicates: bool) -> Self {
        self.server_deduplicates = deduplicates;
        self
    }

    /// The default policy, with [`server_deduplicates`](Self::server_deduplicates) set from
    /// what `policy`'s contract declares for `method`.
    #[must_use]
    pub(crate) fn for_method(policy: &crate::contract::ClientPolicy, method: &str) -> Self {
        Self::default().server_deduplicates(policy.deduplicates(method))
    }

    /// Opt in to retrying an ambiguous close when the request is idempotent (default `false`:
    /// an ambiguous close is surfaced). A request key alone is not enough here: in Regime C the
    /// server declared no contract, so nothing says it deduplicates keys. No client offers this
    /// opt-in: only the tests set it.
    #[cfg(test)]
    #[must_use]
    pub(crate) fn retry_ambiguous_if_idempotent(mut self, retry: bool) -> Self {
        self.retry_ambiguous_if_idempotent = retry;
        self
    }

    /// The decision for `outcome` of a request with the given traits.
    #[must_use]
    pub(crate) fn decide(&self, outcome: &Outcome, request: &RequestTraits) -> RetryDecision {
        let if_safe = || {
            if request.is_idempotent {
                RetryDecision::Retry(RetryReason::Idempotent)
            } else if request.request_key.is_some() && self.server_deduplicates {
                RetryDecision::Retry(RetryReason::Keyed)
            } else if request.request_key.is_some() {
                RetryDecision::SurfaceToCaller(RetryReason::NotDeduplicated)
            } else {
                RetryDecision::SurfaceToCaller(RetryReason::OutcomeUnknown)
            }
        };
        match &outcome.verdict {
            Verdict::Clean => RetryDecision::DoNotRetry(RetryReason::Complete),
            // SPEC.md §3.1: the ABORT code says whether a retry can help.
            Verdict::Aborted(abort) => match abort.code {
                AbortCode::Overloaded | AbortCode::UpstreamFailed => if_safe(),
                AbortCode::InternalError | AbortCode::MessageTooLarge => {
                    RetryDecision::DoNotRetry(RetryReason::WouldRepeat)
                }
                AbortCode::Cancelled => RetryDecision::DoNotRetry(RetryReason::Cancelled),
                AbortCode::Unspecified | AbortCode::Other(_) => {
                    RetryDecision::SurfaceToCaller(RetryReason::UnknownAbort)
                }
            },
            Verdict::ContractViolation(_) | Verdict::MappingViolation(_) => {
                RetryDecision::DoNotRetry(RetryReason::ContractViolation)
            }
            Verdict::Ambiguous(_)
                if self.retry_ambiguous_if_idempotent && request.is_idempotent =>
            {
                RetryDecision::Retry(RetryReason::Idempotent)
            }
            Verdict::Ambiguous(_) => RetryDecision::SurfaceToCaller(RetryReason::Ambiguous),
            Verdict::Abandoned { .. }
            | Verdict::Corrupt(_)
            | Verdict::Spliced(_)
            | Verdict::CrossWired { .. } => if_safe(),
        }
    }
}
