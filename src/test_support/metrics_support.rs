//! A `metrics` recorder for tests: `metrics-util`'s debugging recorder, read by name and labels.
//! The crate's unit tests and the test binaries in tests/ (through `tests/support/mod.rs`)
//! compile this one file.
#![allow(dead_code)] // each includer uses a part of it

use std::collections::BTreeMap;
use std::sync::Mutex;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// A metric series: its name and its labels, sorted.
type Series = (String, Vec<(String, String)>);

/// A recorder local to a test, and what it holds. The debugging recorder's snapshots drain its
/// values, so they are added up here.
pub(crate) struct Recorded {
    recorder: DebuggingRecorder,
    snapshotter: Snapshotter,
    counters: Mutex<BTreeMap<Series, u64>>,
    histograms: Mutex<BTreeMap<Series, Vec<f64>>>,
}

impl Recorded {
    pub(crate) fn new() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        Self {
            recorder,
            snapshotter,
            counters: Mutex::default(),
            histograms: Mutex::default(),
        }
    }

    /// Runs `f` with this recorder as the thread's recorder.
    pub(crate) fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, f)
    }

    /// Makes this recorder the thread's recorder until the guard drops (for a current-thread
    /// tokio runtime, whose tasks all run on this thread).
    pub(crate) fn install_local(&self) -> metrics::LocalRecorderGuard<'_> {
        metrics::set_default_local_recorder(&self.recorder)
    }

    /// Moves what the recorder holds into the running totals.
    fn drain(&self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let mut labels: Vec<(String, String)> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let series = (key.key().name().to_owned(), labels);
            match value {
                DebugValue::Counter(n) => {
                    *self.counters.lock().unwrap().entry(series).or_default() += n;
                }
                DebugValue::Histogram(values) => self
                    .histograms
                    .lock()
                    .unwrap()
                    .entry(series)
                    .or_default()
                    .extend(values.into_iter().map(|v| v.0)),
                DebugValue::Gauge(_) => {}
            }
        }
    }

    fn matches((name, series_labels): &Series, wanted: &str, labels: &[(&str, &str)]) -> bool {
        name == wanted
            && labels
                .iter()
                .all(|(k, v)| series_labels.iter().any(|(sk, sv)| sk == k && sv == v))
    }

    /// The sum of every counter series of `name` that carries all of `labels`.
    pub(crate) fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.drain();
        self.counters
            .lock()
            .unwrap()
            .iter()
            .filter(|(series, _)| Self::matches(series, name, labels))
            .map(|(_, n)| n)
            .sum()
    }

    /// Every value recorded in the histogram series of `name` that carry all of `labels`.
    pub(crate) fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.drain();
        self.histograms
            .lock()
            .unwrap()
            .iter()
            .filter(|(series, _)| Self::matches(series, name, labels))
            .flat_map(|(_, values)| values.iter().copied())
            .collect()
    }
}
