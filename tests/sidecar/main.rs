//! `mcp-frame proxy` (the sidecar) against Rust upstreams and hostile ones, and the layer's SSE
//! pass-through with every line ending at every split.
//!
//! | module | what |
//! |---|---|
//! | `line_endings` | `FramingLayer` in front of SSE bodies ending their lines in LF, CRLF, CR or a mix, split at every byte |
//! | `support` | the decoders' view of a body, the proxy process, scripted upstreams |
//! | `forwarding` | the sidecar in front of rmcp: stock and framing clients, headers, health, deduplication |
//! | `operations` | `--help`, the environment, JSON logs, the Prometheus endpoint |
//! | `hostile` | upstreams that fail: unreachable, silent, garbage, cut, endless; bad requests; a flood |

mod forwarding;
mod hostile;
mod line_endings;
mod operations;
mod support;
