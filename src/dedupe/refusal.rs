//! Why a keyed call was not executed, and the JSON-RPC error a caller gets for it
//! (SPEC.md §17.9).

use std::time::Duration;

use serde_json::{Value, json};

use super::store::StoreError;
use crate::ids::RequestKey;

use crate::retry::DEDUPE_DATA_KEY;

/// JSON-RPC error code of [`Refusal::Conflict`].
pub(crate) const CODE_CONFLICT: i64 = -32080;
/// JSON-RPC error code of [`Refusal::InProgress`].
pub(crate) const CODE_IN_PROGRESS: i64 = -32081;
/// JSON-RPC error code of [`Refusal::ResultNotStored`].
pub(crate) const CODE_RESULT_NOT_STORED: i64 = -32082;
/// JSON-RPC error code of [`Refusal::OutcomeUnknown`].
pub(crate) const CODE_OUTCOME_UNKNOWN: i64 = -32083;
/// JSON-RPC error code of [`Refusal::StoreUnavailable`].
pub(crate) const CODE_STORE_UNAVAILABLE: i64 = -32084;
/// JSON-RPC error code of [`Refusal::LeaseLost`].
pub(crate) const CODE_LEASE_LOST: i64 = -32085;

/// Why a keyed call was not executed (nor replayed).
///
/// Each maps to a JSON-RPC error ([`to_error`](Self::to_error)) with its own code in the
/// implementation-defined server error range and a machine-readable `data` entry, so a client
/// tells a retryable refusal ("in progress", "store unavailable": retry with the same key) from
/// a final one ("conflict", "result not stored", "outcome unknown": retrying cannot help).
///
/// | refusal | code | `reason` | retryable |
/// |---|---|---|---|
/// | [`Conflict`](Self::Conflict) | -32080 | `key_conflict` | no |
/// | [`InProgress`](Self::InProgress) | -32081 | `in_progress` | yes |
/// | [`ResultNotStored`](Self::ResultNotStored) | -32082 | `result_not_stored` | no |
/// | [`OutcomeUnknown`](Self::OutcomeUnknown) | -32083 | `outcome_unknown` | no |
/// | [`StoreUnavailable`](Self::StoreUnavailable) | -32084 | `store_unavailable` | yes |
/// | [`LeaseLost`](Self::LeaseLost) | -32085 | `lease_lost` | no |
///
/// The unit tests below check the table and the error objects.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Refusal {
    /// The key was used before with other parameters (another fingerprint): nothing executed.
    #[error("the request key was already used with different parameters")]
    Conflict,
    /// Another attempt with this key is executing and did not finish within the wait.
    #[error("an earlier attempt with this request key is still executing (waited {waited:?})")]
    InProgress {
        /// How long this attempt waited for the other one.
        waited: Duration,
        /// A suggested delay before retrying.
        retry_after: Duration,
    },
    /// The call completed, but its result was too large to store: it cannot be replayed, and
    /// it is not executed again.
    #[error(
        "the call with this request key completed, but its result ({size} bytes) was too large to store"
    )]
    ResultNotStored {
        /// The size of the result that was not stored, in bytes.
        size: u64,
    },
    /// An earlier attempt's lease expired without a result, and the server is configured not to
    /// execute again ([`LeaseExpiry::Refuse`](super::LeaseExpiry::Refuse)): whether it took
    /// effect is unknown.
    #[error("an earlier attempt with this request key stopped without a result: outcome unknown")]
    OutcomeUnknown,
    /// The deduplication store could not be reached: the call was not executed unprotected.
    #[error("the deduplication store is unavailable: {0}")]
    StoreUnavailable(#[source] StoreError),
    /// This attempt executed, but its lease had been taken over by another attempt before it
    /// could record its result (it ran longer than its lease without renewals reaching the
    /// store): the call may have executed twice. For a server that prefers telling its caller
    /// over answering with the result.
    // SPEC.md §17.9's refusal for such a server: this crate's layers answer with the result and
    // count the lost lease (`mcp_framing.dedupe.completions`), so nothing here refuses with it.
    #[allow(dead_code)]
    #[error("the execution's lease was taken over before its result was recorded")]
    LeaseLost,
}

impl Refusal {
    /// The JSON-RPC error code (see the table on [`Refusal`]).
    #[must_use]
    pub(crate) fn code(&self) -> i64 {
        match self {
            Self::Conflict => CODE_CONFLICT,
            Self::InProgress { .. } => CODE_IN_PROGRESS,
            Self::ResultNotStored { .. } => CODE_RESULT_NOT_STORED,
            Self::OutcomeUnknown => CODE_OUTCOME_UNKNOWN,
            Self::StoreUnavailable(_) => CODE_STORE_UNAVAILABLE,
            Self::LeaseLost => CODE_LEASE_LOST,
        }
    }

    /// The machine-readable reason (see the table on [`Refusal`]).
    #[must_use]
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Conflict => "key_conflict",
            Self::InProgress { .. } => "in_progress",
            Self::ResultNotStored { .. } => "result_not_stored",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::StoreUnavailable(_) => "store_unavailable",
            Self::LeaseLost => "lease_lost",
        }
    }

    /// Whether a retry with the same key may succeed.
    #[must_use]
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(self, Self::InProgress { .. } | Self::StoreUnavailable(_))
    }

    /// The JSON-RPC error object: `{"code", "message", "data": {DEDUPE_DATA_KEY: {...}}}`.
    #[must_use]
    pub(crate) fn to_error(&self, key: RequestKey) -> Value {
        let mut data = json!({
            "reason": self.reason(),
            "retryable": self.is_retryable(),
            "requestKey": key.to_string(),
        });
        match self {
            Self::InProgress { retry_after, .. } => {
                data["retryAfterMs"] =
                    json!(u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX));
            }
            Self::StoreUnavailable(_) => data["retryAfterMs"] = json!(1000),
            Self::ResultNotStored { size } => data["resultBytes"] = json!(size),
            _ => {}
        }
        json!({"code": self.code(), "message": format!("mcp-framing: {self}"),
               "data": {DEDUPE_DATA_KEY: data}})
    }

    /// The whole JSON-RPC error response under `id` (the id of the attempt being answered).
    #[must_use]
    pub(crate) fn to_response(&self, id: &Value, key: RequestKey) -> String {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_error(key)}).to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::Refusal;
    use crate::dedupe::StoreError;
    use crate::ids::RequestKey;

    #[test]
    fn each_refusal_has_the_code_reason_and_retryability_of_the_table() {
        let timeout = || StoreError::Timeout {
            after: Duration::from_secs(2),
        };
        let in_progress = Refusal::InProgress {
            waited: Duration::from_secs(5),
            retry_after: Duration::from_millis(250),
        };
        let table = [
            (Refusal::Conflict, -32080, "key_conflict", false),
            (in_progress, -32081, "in_progress", true),
            (
                Refusal::ResultNotStored { size: 10 },
                -32082,
                "result_not_stored",
                false,
            ),
            (Refusal::OutcomeUnknown, -32083, "outcome_unknown", false),
            (
                Refusal::StoreUnavailable(timeout()),
                -32084,
                "store_unavailable",
                true,
            ),
            (Refusal::LeaseLost, -32085, "lease_lost", false),
        ];
        for (refusal, code, reason, retryable) in table {
            assert_eq!(
                (refusal.code(), refusal.reason(), refusal.is_retryable()),
                (code, reason, retryable)
            );
        }
    }

    #[test]
    fn a_refusal_answers_under_the_attempts_id_with_its_data_entry() {
        let key = RequestKey::from_bytes([0xab; 16]);
        let refusal = Refusal::InProgress {
            waited: Duration::from_secs(5),
            retry_after: Duration::from_millis(250),
        };
        let response: Value = serde_json::from_str(&refusal.to_response(&7.into(), key)).unwrap();
        assert_eq!(response["jsonrpc"], "2.0");
        assert_eq!(response["id"], 7);
        assert_eq!(response["error"]["code"], -32081);
        let data = &response["error"]["data"]["io.github.mcp-framing/dedupe"];
        assert_eq!(data["reason"], "in_progress");
        assert_eq!(data["retryable"], true);
        assert_eq!(data["retryAfterMs"], 250);
        assert_eq!(data["requestKey"], key.to_string());
    }

    #[test]
    fn a_final_refusal_says_it_is_not_retryable_and_a_result_not_stored_gives_its_size() {
        let conflict = Refusal::Conflict.to_error(RequestKey::random());
        assert_eq!(conflict["code"], -32080);
        assert_eq!(
            conflict["data"]["io.github.mcp-framing/dedupe"]["retryable"],
            false
        );
        let not_stored = Refusal::ResultNotStored { size: 103 }.to_error(RequestKey::random());
        assert_eq!(
            not_stored["data"]["io.github.mcp-framing/dedupe"]["resultBytes"],
            103
        );
    }
}
