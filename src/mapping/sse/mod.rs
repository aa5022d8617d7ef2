//! The SSE mapping (SPEC.md §15): a framed stream carried inside `text/event-stream` events.
//!
//! MCP's Streamable HTTP answers a request with `application/json` or `text/event-stream` only,
//! so a framed response that must pass through unchanged MCP infrastructure travels as SSE
//! events named [`FRAME_EVENT`] (`mcp-frame`) whose `data` is the standard base64 (with padding)
//! of one or more whole frames. The decoded bytes are exactly the binary stream: the same CRCs,
//! digests and sequence numbers, so [`StreamDecoder`](crate::StreamDecoder) decides as it does
//! for a binary body.
//!
//! ```text
//! event: mcp-frame
//! data: n00BAaGio6QAAAAg...      <- base64 of one frame (HEAD)
//!                                 <- blank line ends the event
//! : keep-alive                    <- comments are skipped
//! event: mcp-frame
//! data: n00BAqGio6UAAAAL...      <- base64 of a DATA frame
//!
//! ```
//!
//! Both halves are sans-I/O: [`SseFrameEncoder`] writes events into a `BytesMut`,
//! [`SseFrameDecoder`] takes body bytes as they arrive (any chunking, `\n`, `\r\n` or `\r` line
//! endings, `:` comments) and returns the frame bytes they carry. [`SseParser`] is the general
//! event parser underneath, usable for unframed SSE bodies too.

mod base64;
mod decoder;
mod encoder;
mod parser;
mod parts;

pub(crate) use base64::{put_base64, put_base64_decoded};
pub(crate) use decoder::FirstError;
pub use decoder::SseFrameDecoder;
pub use encoder::SseFrameEncoder;
pub(crate) use parser::RawItem;
#[cfg(feature = "rmcp-server")]
pub(crate) use parts::Parts;
// The layer splits rmcp's lines with the parser's own splitter, and reads a data line's value
// as the parser does.
#[cfg(feature = "rmcp-server")]
pub(crate) use parser::{LineSplitter, Piece, data_value};
pub(crate) use parser::is_message_event;
pub use parser::{SseEvent, SseParser};

#[cfg(test)]
mod tests;
