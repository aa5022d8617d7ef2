//! Whether to retry a request after its response stream ended (SPEC.md §11.6): the decision
//! and its reason (public in [`client`](crate::client), where their rules are written on
//! [`RetryDecision`]) and the policy that takes it (the clients').

use std::fmt;

// The policy that takes the decisions (and reads a deduplication refusal back): the clients'.
pub(crate) mod policy;
#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use policy::*;

/// Why a [`RetryDecision`] was taken.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::RetryReason;
/// assert_eq!(RetryReason::Keyed.to_string(),
///            "the request carries a request key, so the server can deduplicate a retry");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryReason {
    /// The response is complete.
    Complete,
    /// Repeating the request is harmless: it is idempotent.
    Idempotent,
    /// Repeating the request is harmless: it carries a request key.
    Keyed,
    /// The request may have executed and is neither idempotent nor keyed.
    OutcomeUnknown,
    /// Regime C: whether the stream completed cannot be told.
    Ambiguous,
    /// The request carries a key, but the server does not declare that it deduplicates the
    /// method (SPEC.md §17.11): a retry could execute it again.
    NotDeduplicated,
    /// The server aborted because the request was cancelled.
    Cancelled,
    /// The server failed in a way a retry would meet again: an internal error or a message
    /// too large (ABORT codes 1 and 5, SPEC.md §3.1).
    WouldRepeat,
    /// The server aborted without a known reason (ABORT code 0, or a reserved code): neither a
    /// retry nor finality is implied, so the caller decides.
    UnknownAbort,
    /// The server broke the negotiated framing contract: re-resolve discovery and rebuild the
    /// policy rather than retrying.
    ContractViolation,
}

impl RetryReason {
    /// A stable snake_case name for telemetry (the `reason` label of the retry metrics).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::RetryReason;
    /// assert_eq!(RetryReason::OutcomeUnknown.name(), "outcome_unknown");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Idempotent => "idempotent",
            Self::Keyed => "keyed",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::NotDeduplicated => "not_deduplicated",
            Self::Ambiguous => "ambiguous",
            Self::Cancelled => "cancelled",
            Self::WouldRepeat => "would_repeat",
            Self::UnknownAbort => "unknown_abort",
            Self::ContractViolation => "contract_violation",
        }
    }
}

impl fmt::Display for RetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Complete => "the response is complete",
            Self::Idempotent => "the request is idempotent",
            Self::Keyed => {
                "the request carries a request key, so the server can deduplicate a retry"
            }
            Self::OutcomeUnknown => {
                "the request may have executed and is neither idempotent nor keyed"
            }
            Self::NotDeduplicated => {
                "the request carries a key, but the server does not declare deduplication"
            }
            Self::Ambiguous => "stream completion is ambiguous (Regime C): not retried by default",
            Self::Cancelled => "the request was cancelled",
            Self::WouldRepeat => "a retry would fail the same way",
            Self::UnknownAbort => "the server aborted without a known reason",
            Self::ContractViolation => "the server broke the framing contract",
        })
    }
}

/// What to do after a response stream ended (SPEC.md §11.6).
///
/// The clients ([`RetryingClient`](crate::client::RetryingClient) and `auto_retry` on
/// [`FramingHttpClient`](crate::rmcp_http::FramingHttpClient)) decide after every attempt from
/// the stream's [`Outcome`](crate::outcome::Outcome) and what the request is (idempotent? does it
/// carry a request key?): [`Retry`](Self::Retry), [`DoNotRetry`](Self::DoNotRetry) or
/// [`SurfaceToCaller`](Self::SurfaceToCaller), always with a [`RetryReason`]. An observer
/// ([`RetryingClient::observe`](crate::client::RetryingClient::observe)) sees each decision.
///
/// # Why a silent retry against re-resolved stateless discovery masks truncation
///
/// With stateless per-request discovery (MCP 2026-07-28 behind an autoscaler), a retry is resolved
/// afresh and usually lands on another instance, which answers completely. If the client retried
/// a cut stream silently, the caller would see one success: the truncation (a proxy cutting
/// bodies, an instance dying mid-response, an old instance without framing) never reaches a log
/// or a dashboard, and a request that is not idempotent may have executed twice, once on the
/// instance whose response was lost. No probe can tell, since the first instance is gone or
/// unreachable by design. Hence the rules:
///
/// - an abandoned (or corrupt, spliced, cross-wired) stream is retried only when repeating the
///   request is harmless: it is idempotent, or it carries a request key (the same key on every
///   retry) **and** the server declares that it deduplicates keyed requests of that method
///   (SPEC.md §17.11);
/// - a stream the server aborted is decided by the ABORT code (SPEC.md §3.1): overloaded or
///   shutting down and upstream failures follow the rule above, an internal error or a message
///   too large is final (a retry would fail the same way), a cancellation is final, and an
///   unspecified or reserved code is surfaced to the caller;
/// - an ambiguous close (Regime C) is never retried by default: whether it completed is unknown;
/// - every non-clean outcome is recorded ([`telemetry`](crate::telemetry)) *before* the retry,
///   so it shows even when the retry succeeds.
///
/// # Examples
///
/// ```
/// use mcp_framing::client::{RetryDecision, RetryReason};
/// let d = RetryDecision::SurfaceToCaller(RetryReason::OutcomeUnknown);
/// assert_eq!(d.reason(), RetryReason::OutcomeUnknown);
/// assert_eq!(d.name(), "surface_to_caller");
/// assert!(!d.is_retry());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryDecision {
    /// Send the request again, with the same request key.
    Retry(RetryReason),
    /// Do not send it again: the response is final (complete, or a failure a retry would
    /// repeat). Report the result or error as is.
    DoNotRetry(RetryReason),
    /// Whether the request took effect is unknown: return the error to the caller, who alone can
    /// decide (check state, ask the user, retry knowingly).
    SurfaceToCaller(RetryReason),
}

impl RetryDecision {
    /// Why.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::{RetryDecision, RetryReason};
    ///
    /// // The reason is the label to report, whatever the decision was:
    /// let decision = RetryDecision::DoNotRetry(RetryReason::WouldRepeat);
    /// assert_eq!(decision.reason(), RetryReason::WouldRepeat);
    /// assert_eq!(decision.reason().name(), "would_repeat");
    /// ```
    #[must_use]
    pub fn reason(&self) -> RetryReason {
        match *self {
            Self::Retry(reason) | Self::DoNotRetry(reason) | Self::SurfaceToCaller(reason) => {
                reason
            }
        }
    }

    /// Whether to retry.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::{RetryDecision, RetryReason};
    ///
    /// assert!(RetryDecision::Retry(RetryReason::Keyed).is_retry());
    /// assert!(!RetryDecision::DoNotRetry(RetryReason::Complete).is_retry());
    /// assert!(!RetryDecision::SurfaceToCaller(RetryReason::UnknownAbort).is_retry());
    /// ```
    #[must_use]
    pub fn is_retry(&self) -> bool {
        matches!(self, Self::Retry(_))
    }

    /// A stable snake_case name for telemetry: `retry`, `do_not_retry`, `surface_to_caller`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::client::{RetryDecision, RetryReason};
    ///
    /// let names: Vec<&str> = [
    ///     RetryDecision::Retry(RetryReason::Idempotent),
    ///     RetryDecision::DoNotRetry(RetryReason::Cancelled),
    ///     RetryDecision::SurfaceToCaller(RetryReason::OutcomeUnknown),
    /// ]
    /// .iter()
    /// .map(RetryDecision::name)
    /// .collect();
    /// assert_eq!(names, ["retry", "do_not_retry", "surface_to_caller"]);
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Retry(_) => "retry",
            Self::DoNotRetry(_) => "do_not_retry",
            Self::SurfaceToCaller(_) => "surface_to_caller",
        }
    }
}

impl fmt::Display for RetryDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let action = match self {
            Self::Retry(_) => "retry",
            Self::DoNotRetry(_) => "do not retry",
            Self::SurfaceToCaller(_) => "surface to the caller",
        };
        write!(f, "{action}: {}", self.reason())
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
