//! The main job (`examples/stateless_autoscaler.rs`, README "The main job") run as a process,
//! and its story checked from what it prints: unframed, every cut is a JSON parse error that a
//! blind retry papers over by running the tool again; framed, every cut is abandoned and the
//! keyed retry is replayed from the deduplication store, one execution per call; a backend
//! without `FramingLayer` is refused before any tool call (Regime C).

use crate::support::example_support;

use std::process::Command;
use std::sync::OnceLock;

const CALLS: usize = 3;

/// The main job's stdout, from one run shared by the tests (it exits non-zero if its own
/// checks fail, and that fails every test here).
fn main_job() -> &'static str {
    static OUTPUT: OnceLock<String> = OnceLock::new();
    OUTPUT.get_or_init(|| {
        let output = Command::new(example_support::example_binary("stateless_autoscaler"))
            .output()
            .expect("run the main job");
        let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
        assert!(
            output.status.success(),
            "the main job failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    })
}

/// The lines of the section whose heading starts with `== {heading}`, up to the next heading.
fn section(heading: &str) -> Vec<&'static str> {
    let start = format!("== {heading}");
    main_job()
        .lines()
        .skip_while(|line| !line.starts_with(&start))
        .skip(1)
        .take_while(|line| !line.starts_with("=="))
        .collect()
}

/// The (unframed, framed) cells of the summary row labelled `label`.
fn summary(label: &str) -> (String, String) {
    let line = section("summary")
        .into_iter()
        .find(|line| line.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no summary row {label:?} in:\n{}", main_job()));
    let cells: Vec<&str> = line.trim_start()[label.len()..]
        .split("  ")
        .map(str::trim)
        .filter(|cell| !cell.is_empty())
        .collect();
    assert_eq!(cells.len(), 2, "two cells in {line:?}");
    (cells[0].to_owned(), cells[1].to_owned())
}

fn count(lines: &[&str], needle: &str) -> usize {
    lines.iter().filter(|line| line.contains(needle)).count()
}

#[test]
fn unframed_every_cut_is_a_json_parse_error_and_the_blind_retry_runs_the_tool_again() {
    let run = section("run 1: unframed");
    assert_eq!(
        count(&run, "via proxy->backend-a: JSON parse error"),
        CALLS,
        "{run:#?}"
    );
    assert_eq!(
        count(&run, "attempt 2 via backend-b: ok"),
        CALLS,
        "{run:#?}"
    );
    assert_eq!(
        count(&run, "inside the tool call's JSON arguments"),
        CALLS,
        "every cut lands in the arguments: {run:#?}"
    );
    assert_eq!(summary("truncations counted").0, "0");
    assert_eq!(summary("tool calls reported ok").0, CALLS.to_string());
    assert_eq!(
        summary("tool executions (backend-a / backend-b)").0,
        format!("{CALLS} / {CALLS}"),
        "two executions per call"
    );
}

#[test]
fn framed_every_cut_is_abandoned_and_the_keyed_retry_is_replayed_once_per_call() {
    let run = section("run 2: framed");
    assert_eq!(count(&run, "ok after 2 attempt(s)"), CALLS, "{run:#?}");
    assert_eq!(
        count(&run, "attempt 1 via proxy->backend-a: abandoned"),
        CALLS,
        "{run:#?}"
    );
    assert_eq!(count(&run, "retry decision: retry"), CALLS, "{run:#?}");
    assert_eq!(
        count(&run, "attempt 2 via backend-b: complete"),
        CALLS,
        "{run:#?}"
    );
    assert_eq!(summary("truncations counted").1, CALLS.to_string());
    assert_eq!(
        summary("results verified (len+sha256+sentinel)").1,
        CALLS.to_string()
    );
    assert_eq!(
        summary("tool executions (backend-a / backend-b)").1,
        format!("{CALLS} / 0"),
        "one execution per call: the retries are replayed from the store"
    );
    let metrics = section("metrics");
    let counted = |prefix: &str| -> u64 {
        metrics
            .iter()
            .filter(|line| line.trim_start().starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(
        (
            counted("mcp_framing.client.responses{outcome=abandoned"),
            counted("mcp_framing.client.retries{reason=keyed"),
            counted("mcp_framing.client.truncations{"),
        ),
        (CALLS as u64, CALLS as u64, CALLS as u64),
        "{metrics:#?}"
    );
}

#[test]
fn the_framed_client_refuses_a_backend_without_framing_layer_before_any_tool_call() {
    let run = section("run 3");
    assert_eq!(
        count(&run, "refuses to start, no tool call sent"),
        1,
        "{run:#?}"
    );
    assert_eq!(count(&run, "Regime C"), 1, "{run:#?}");
    assert_eq!(summary("start without contract (Regime C)").1, "refused");
}
