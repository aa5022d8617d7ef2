//! The regime decision table of SPEC.md §11.4: what a client may conclude from four
//! observations when a response stream closes.

use std::fmt;

/// The four observations a closed stream is classified from (SPEC.md §11.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Observations {
    /// A terminal sentinel (STREAM_END) was received.
    pub(crate) sentinel_seen: bool,
    /// The payload is self-delimiting: lengths and checksums say where it ends (a framed stream).
    pub(crate) self_delimiting: bool,
    /// The payload's integrity check passed. For a framed stream: every frame and message
    /// checked out *and* either the stream-level check (STREAM_END's message count) passed or
    /// the stream's final response was verified with nothing but filler after it (SPEC.md §7.1),
    /// so a stream cut between two verified notifications does not pass.
    pub(crate) integrity_ok: bool,
    /// Discovery is sticky (retries reach the instance that served the earlier attempt), rather
    /// than re-resolved per request.
    pub(crate) sticky_discovery: bool,
}

/// Which rule decided a stream's completion (SPEC.md §9).
///
/// # Examples
///
/// ```
/// use mcp_framing::outcome::Regime;
/// assert_eq!(Regime::B.to_string(), "B");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Regime {
    /// A terminal sentinel decided: it was seen.
    A,
    /// The self-delimiting payload decided: lengths and checksums.
    B,
    /// Nothing could decide: a clean end and an abandoned one look the same.
    C,
}

impl Regime {
    /// The regime's letter: `A`, `B` or `C`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(mcp_framing::outcome::Regime::C.name(), "C");
    /// ```
    // Hidden: `Display` prints it; the telemetry labels call it.
    #[doc(hidden)]
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
        }
    }
}

impl fmt::Display for Regime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`classify`] concluded when it could conclude something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Completion {
    /// The stream is complete.
    Clean(Regime),
    /// The stream was abandoned before it completed.
    Abandoned(Regime),
}

// The outcomes match on the variants; these shorthands are the tests'.
#[cfg(test)]
impl Completion {
    /// Whether the stream is complete.
    #[must_use]
    pub(crate) fn is_clean(self) -> bool {
        matches!(self, Self::Clean(_))
    }

    /// The regime whose rule decided.
    #[must_use]
    pub(crate) fn regime(self) -> Regime {
        match self {
            Self::Clean(regime) | Self::Abandoned(regime) => regime,
        }
    }
}

/// How the client resolves the server it sends a request to.
///
/// # Examples
///
/// ```
/// use mcp_framing::outcome::DiscoveryMode;
/// assert_eq!(DiscoveryMode::Stateless.to_string(), "stateless per-request discovery");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiscoveryMode {
    /// Resolved once and pinned (e.g. a 2025-* session): a retry reaches the same instance.
    Sticky,
    /// Re-resolved per request (e.g. 2026-07-28 `server/discover` behind an autoscaler): a retry
    /// may reach another instance.
    Stateless,
}

impl fmt::Display for DiscoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sticky => "sticky discovery",
            Self::Stateless => "stateless per-request discovery",
        })
    }
}

/// A stream closed in Regime C: nothing can tell a clean end from an abandoned one.
///
/// A distinct type, **never retried by default** (SPEC.md §11.6), and deliberately not
/// convertible into `std::io::Error` or any transient network error. Its message names the
/// ambiguity and which discovery case it was. A client meets it in
/// [`Verdict::Ambiguous`](crate::outcome::Verdict::Ambiguous) only when it accepted ambiguity and
/// the server declared no framing contract (Regime C).
///
/// # Examples
///
/// ```
/// use mcp_framing::outcome::{DiscoveryMode, Outcome, Verdict};
/// use mcp_framing::StreamDecoder;
///
/// /// What a caller reports of a call that did not complete cleanly.
/// fn explain(outcome: &Outcome) -> String {
///     match &outcome.verdict {
///         // Whether the call took effect is unknown: say so, never retry on your own.
///         Verdict::Ambiguous(err) if err.discovery == DiscoveryMode::Stateless => {
///             format!("outcome unknown (a retry could reach another instance): {err}")
///         }
///         Verdict::Ambiguous(err) => format!("outcome unknown: {err}"),
///         other => format!("{} response", other.name()),
///     }
/// }
/// // A framed stream that never started is abandoned, not ambiguous: its contract was declared.
/// assert_eq!(explain(&StreamDecoder::new().outcome()), "abandoned response");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error(
    "stream completion is ambiguous: no terminal sentinel was mandated and the payload is not \
     self-delimiting, so a clean end and an abandoned stream are indistinguishable; {}",
    ambiguity_case(*discovery)
)]
#[non_exhaustive]
pub struct StreamCompletionAmbiguousError {
    /// Which discovery case it was.
    pub discovery: DiscoveryMode,
}

fn ambiguity_case(discovery: DiscoveryMode) -> &'static str {
    match discovery {
        DiscoveryMode::Sticky => {
            "with sticky discovery the earlier instance might be probed, but the stream contract \
             does not guarantee resumability, so the outcome is not guessed"
        }
        DiscoveryMode::Stateless => {
            "with stateless per-request discovery a retry may reach another instance and would \
             hide whether this attempt completed, so the outcome is not guessed"
        }
    }
}

impl StreamCompletionAmbiguousError {
    /// The error for a close under the given discovery mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::outcome::{DiscoveryMode, StreamCompletionAmbiguousError};
    /// let err = StreamCompletionAmbiguousError::new(DiscoveryMode::Sticky);
    /// assert!(err.to_string().contains("sticky discovery"));
    /// ```
    // Hidden: the clients build it; users read it from `Verdict::Ambiguous`.
    #[doc(hidden)]
    #[must_use]
    pub fn new(discovery: DiscoveryMode) -> Self {
        Self { discovery }
    }

    /// Always `false`: an ambiguous close is never retried by default (see `retry`).
    ///
    /// # Examples
    ///
    /// See [`StreamCompletionAmbiguousError`].
    // Hidden: always `false` (an ambiguous close is never retried by default, SPEC.md §11.6), as the type's docs say; the tests check it.
    #[doc(hidden)]
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// The regime decision table (SPEC.md §11.4), exactly:
///
/// | sentinel seen | self-delimiting | integrity ok | sticky | result |
/// |---|---|---|---|---|
/// | yes | any | any | any | `Clean(A)`: the sentinel is authoritative |
/// | no | yes | yes | any | `Clean(B)` |
/// | no | yes | no | any | `Abandoned(B)` |
/// | no | no | any | any | `Err(StreamCompletionAmbiguousError)`, naming sticky or stateless |
///
/// In Regime C the error is raised whether or not discovery is sticky: a sticky resolver might
/// let one probe the earlier attempt, but the stream contract does not guarantee resumability.
///
/// # Errors
///
/// [`StreamCompletionAmbiguousError`] when neither a sentinel nor a self-delimiting payload can
/// decide (Regime C).
pub(crate) fn classify(obs: &Observations) -> Result<Completion, StreamCompletionAmbiguousError> {
    if obs.sentinel_seen {
        Ok(Completion::Clean(Regime::A))
    } else if obs.self_delimiting {
        Ok(if obs.integrity_ok {
            Completion::Clean(Regime::B)
        } else {
            Completion::Abandoned(Regime::B)
        })
    } else {
        Err(StreamCompletionAmbiguousError::new(
            if obs.sticky_discovery {
                DiscoveryMode::Sticky
            } else {
                DiscoveryMode::Stateless
            },
        ))
    }
}
