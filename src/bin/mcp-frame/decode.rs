//! `decode` (verified messages out) and `verify` (the verdict as an exit status).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::CliError;
use crate::input::{DecoderArgs, InputPath, StreamArgs, open_output};
use crate::verdict::{Outcome, ReadOrWrite, Session, decode_reader};
use mcp_framing::mapping::Mapping;

/// Options of `decode`.
#[derive(Debug, Args)]
pub(crate) struct DecodeArgs {
    #[command(flatten)]
    stream: StreamArgs,
    /// Write the messages to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// What to write after each message.
    #[arg(long, value_enum, default_value_t = Separator::Newline)]
    separator: Separator,
    /// Print the verdict on stderr as JSON instead of one line.
    #[arg(long)]
    json: bool,
}

/// Options of `verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    stream: StreamArgs,
    /// Print the verdict on stdout as JSON.
    #[arg(long)]
    json: bool,
    /// Print nothing; the exit status is the verdict.
    #[arg(short, long, conflicts_with = "json")]
    quiet: bool,
}

/// Separator written after each decoded message.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Separator {
    /// A newline (JSON messages never contain a raw one when minified).
    Newline,
    /// A NUL byte (safe for any message bytes).
    Nul,
    /// Nothing: the messages are concatenated.
    None,
}

impl Separator {
    fn bytes(self) -> &'static [u8] {
        match self {
            Self::Newline => b"\n",
            Self::Nul => b"\0",
            Self::None => b"",
        }
    }
}

fn decode_input(
    input: &InputPath,
    decoder: &DecoderArgs,
    mapping: Mapping,
    on_message: crate::verdict::OnMessage<'_>,
    output: &str,
) -> Result<Outcome, CliError> {
    let reader = input.open()?;
    let session = Session::new(
        decoder.decoder(),
        mapping,
        decoder.max_event_data,
        decoder.require_sentinel,
    );
    decode_reader(reader, session, on_message).map_err(|e| match e {
        ReadOrWrite::Read(e) => CliError::io(format!("cannot read {}", input.name()), e),
        ReadOrWrite::Write(e) => CliError::io(format!("cannot write to {output}"), e),
    })
}

/// `decode`: each message to the output as soon as it is verified; the verdict on stderr.
///
/// # Errors
///
/// Reading the input or writing the output failed.
pub(crate) fn run_decode(args: &DecodeArgs) -> Result<u8, CliError> {
    let input = InputPath::from(args.stream.input.as_path());
    let output_name = args
        .output
        .as_ref()
        .map_or_else(|| "stdout".to_owned(), |p| p.display().to_string());
    let mut out = open_output(args.output.as_deref(), false)?;
    let sep = args.separator.bytes();
    let mut write = |m: &mcp_framing::VerifiedMessage| {
        out.write_all(m.bytes())?;
        out.write_all(sep)?;
        out.flush()
    };
    let outcome = decode_input(
        &input,
        &args.stream.decoder,
        args.stream.mapping.mapping,
        &mut write,
        &output_name,
    )?;
    out.flush()
        .map_err(|e| CliError::io(format!("cannot write to {output_name}"), e))?;
    if args.json {
        eprintln!("{}", outcome.to_json());
    } else {
        eprintln!("{}", outcome.line());
    }
    Ok(outcome.status().exit_code())
}

/// `verify`: decode without output; the exit status is the verdict.
///
/// # Errors
///
/// Reading the input failed.
pub(crate) fn run_verify(args: &VerifyArgs) -> Result<u8, CliError> {
    let input = InputPath::from(args.stream.input.as_path());
    let outcome = decode_input(
        &input,
        &args.stream.decoder,
        args.stream.mapping.mapping,
        &mut |_| Ok(()),
        "nowhere",
    )?;
    if args.json {
        println!("{}", outcome.to_json());
    } else if !args.quiet {
        println!("{}: {}", input.name(), outcome.line());
    }
    Ok(outcome.status().exit_code())
}
