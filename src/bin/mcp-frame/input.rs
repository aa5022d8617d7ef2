//! Opening inputs and outputs ("-" is stdin/stdout), and the decoder options shared by commands.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use mcp_framing::{
    DecoderBuilder, Limits, RequestKey, StreamDecoder,
    internals::limits::{
        DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_FRAME_PAYLOAD,
    },
    mapping::Mapping,
};

use crate::CliError;

/// Where a stream or message bytes come from.
#[derive(Clone, Debug)]
pub(crate) struct InputPath(PathBuf);

impl InputPath {
    fn is_stdin(&self) -> bool {
        self.0 == Path::new("-")
    }

    /// A name for messages: the path, or "stdin".
    pub(crate) fn name(&self) -> String {
        if self.is_stdin() {
            "stdin".to_owned()
        } else {
            self.0.display().to_string()
        }
    }

    pub(crate) fn open(&self) -> Result<Box<dyn Read>, CliError> {
        if self.is_stdin() {
            Ok(Box::new(io::stdin().lock()))
        } else {
            let file = File::open(&self.0)
                .map_err(|e| CliError::io(format!("cannot open {}", self.name()), e))?;
            Ok(Box::new(file))
        }
    }

    pub(crate) fn read_all(&self) -> Result<Vec<u8>, CliError> {
        let mut data = Vec::new();
        self.open()?
            .read_to_end(&mut data)
            .map_err(|e| CliError::io(format!("cannot read {}", self.name()), e))?;
        Ok(data)
    }
}

impl From<&Path> for InputPath {
    fn from(path: &Path) -> Self {
        Self(path.to_path_buf())
    }
}

/// Opens `path` for writing, or stdout; refuses to write a binary stream to a terminal.
pub(crate) fn open_output(path: Option<&Path>, binary: bool) -> Result<Box<dyn Write>, CliError> {
    match path {
        Some(p) if p != Path::new("-") => {
            let file = File::create(p)
                .map_err(|e| CliError::io(format!("cannot create {}", p.display()), e))?;
            Ok(Box::new(io::BufWriter::new(file)))
        }
        _ => {
            let stdout = io::stdout();
            if binary && stdout.is_terminal() {
                return Err(CliError::Usage(
                    "refusing to write a binary stream to a terminal: use -o FILE or a pipe".into(),
                ));
            }
            Ok(Box::new(stdout.lock()))
        }
    }
}

/// The stream a reading command works on: where it comes from, how it is carried and how it is
/// decoded.
#[derive(Clone, Debug, Args)]
pub(crate) struct StreamArgs {
    /// The framed stream: a file, or `-` for stdin.
    #[arg(default_value = "-")]
    pub(crate) input: PathBuf,
    #[command(flatten)]
    pub(crate) mapping: MappingArgs,
    #[command(flatten)]
    pub(crate) decoder: DecoderArgs,
}

/// How the stream is carried (SPEC.md §15, §16, §18), shared by every command.
#[derive(Clone, Copy, Debug, Args)]
pub(crate) struct MappingArgs {
    /// How the stream is carried.
    #[arg(long, default_value = "binary", value_parser = mapping_parser())]
    pub(crate) mapping: Mapping,
}

/// The crate's mappings by name ([`Mapping::name`]), each with a line of help.
fn mapping_parser() -> impl TypedValueParser<Value = Mapping> {
    let values = Mapping::ALL.map(|mapping| {
        let help = match mapping {
            Mapping::Binary => {
                "The frames are the bytes (`application/vnd.mcp-framing`, a pipe, a file)"
            }
            Mapping::Sse => {
                "`text/event-stream`: `mcp-frame` events carrying base64 of whole frames"
            }
            Mapping::Compat => {
                "`text/event-stream`: the messages as plain `message` events, the frames in \
                 `:mcp-framing` comment records (the compatible mapping)"
            }
            _ => mapping.content_type(),
        };
        PossibleValue::new(mapping.name()).help(help)
    });
    PossibleValuesParser::new(values).map(|name| name.parse::<Mapping>().expect("a possible value"))
}

/// The receiver's limits and request-key check (SPEC.md §6, §10).
#[derive(Clone, Debug, Args)]
pub(crate) struct DecoderArgs {
    /// Largest frame payload accepted, in bytes (at least 1026).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_FRAME_PAYLOAD,
          value_parser = clap::value_parser!(u32).range(i64::from(MIN_MAX_FRAME_PAYLOAD)..))]
    pub(crate) max_frame_payload: u32,
    /// Largest message accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_SIZE)]
    pub(crate) max_message_size: u64,
    /// Most bytes one stream may carry.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT.max_stream_bytes)]
    pub(crate) max_stream_bytes: u64,
    /// Most messages one stream may carry.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT.max_messages)]
    pub(crate) max_messages: u64,
    /// Most KEEPALIVE frames in a row.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT.max_keepalives_in_a_row)]
    pub(crate) max_keepalives_in_a_row: u32,
    /// Most ignorable frames in a row.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT.max_ignorable_in_a_row)]
    pub(crate) max_ignorable_in_a_row: u32,
    /// Most SSE lines in a row that carry no data (comments, blank lines).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT.max_sse_comments_in_a_row)]
    pub(crate) max_sse_comments_in_a_row: u32,
    /// The request key the client sent (32 hex digits): a stream for another request is a
    /// contract violation, and a stream cut after its verified final response is clean in
    /// Regime B (exit status 0, SPEC.md §7 row 4) instead of abandoned.
    #[arg(long, value_name = "HEX")]
    pub(crate) expect_request_key: Option<RequestKey>,
    /// Treat a clean stream without its STREAM_END sentinel (the final response verified, then
    /// the input ended: Regime B, SPEC.md §7 row 4) as a failure: exit status 1 instead of 0.
    #[arg(long)]
    pub(crate) require_sentinel: bool,
    /// Largest SSE event (its data) or line accepted, in bytes; default 262144 for `sse`,
    /// 16842752 for `compat` (whose events carry whole messages).
    #[arg(long, value_name = "BYTES")]
    pub(crate) max_event_data: Option<usize>,
}

impl DecoderArgs {
    pub(crate) fn decoder(&self) -> StreamDecoder {
        let limits = Limits::default()
            .max_frame_payload(self.max_frame_payload)
            .max_message_size(self.max_message_size)
            .max_stream_bytes(self.max_stream_bytes)
            .max_messages(self.max_messages)
            .max_keepalives_in_a_row(self.max_keepalives_in_a_row)
            .max_ignorable_in_a_row(self.max_ignorable_in_a_row)
            .max_sse_comments_in_a_row(self.max_sse_comments_in_a_row);
        let mut builder: DecoderBuilder = StreamDecoder::builder().limits(limits);
        if let Some(key) = self.expect_request_key {
            builder = builder.expect_request_key(key);
        }
        builder.build()
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
